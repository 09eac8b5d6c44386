"""/completion's generation_settings and /props' default_generation_settings.params state the keys llama-server's task
params write (tools/server/server-task.cpp task_params::to_json). They lacked the samplers' settings (dynatemp_*,
top_n_sigma, xtc_*, dry_*, mirostat*), logit_bias, timings_per_token, post_sampling_probs and lora: llama.cpp's web UI
syncs its settings from /props' params by key (webui parameter-sync.service.ts: dry_base, xtc_threshold, ...), clients
check reasoning_in_content there, and `response_fields: ["generation_settings/logit_bias"]` found nothing."""
import orjson

# server-task.cpp task_params::to_json's keys (the full form, /completion's generation_settings), less chat_format,
# speculative.* and the grammar's, which this server does not state.
KEYS = {"seed", "temperature", "dynatemp_range", "dynatemp_exponent", "top_k", "top_p", "min_p", "top_n_sigma",
        "xtc_probability", "xtc_threshold", "typical_p", "repeat_last_n", "repeat_penalty", "presence_penalty",
        "frequency_penalty", "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n",
        "dry_sequence_breakers", "mirostat", "mirostat_tau", "mirostat_eta", "stop", "max_tokens", "n_predict",
        "n_keep", "n_discard", "ignore_eos", "stream", "logit_bias", "n_probs", "min_keep", "reasoning_in_content",
        "thinking_forced_open", "samplers", "timings_per_token", "post_sampling_probs", "backend_sampling", "lora"}
# common/common.h common_params_sampling: each of these samplers off, as they run here (turned on, refused).
OFF = {"dynatemp_range": 0.0, "top_n_sigma": -1.0, "xtc_probability": 0.0, "dry_multiplier": 0.0, "mirostat": 0}


async def post(client, path: str, body: dict) -> dict:
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    return orjson.loads(await response.read())


async def test_generation_settings_state_every_key_with_the_requests_values(stack):
    client, _ = stack
    body = {"prompt": "hi", "n_predict": 2, "logit_bias": [[5, -2.5], [7, False]], "n_probs": 3,
            "timings_per_token": True}
    settings = (await post(client, "/completion", body))["generation_settings"]
    assert KEYS <= settings.keys()
    assert settings["logit_bias"] == [{"bias": -2.5, "token": 5}, {"bias": -100.0, "token": 7}]
    assert settings["n_probs"] == 3 and settings["timings_per_token"] is True
    assert settings["post_sampling_probs"] is False and settings["lora"] == []
    assert {key: settings[key] for key in OFF} == OFF
    assert settings["dry_sequence_breakers"] == ["\n", ":", "\"", "*"]


async def test_response_fields_find_a_nested_setting(stack):
    client, _ = stack
    body = {"prompt": "hi", "n_predict": 1, "logit_bias": {"5": 1.5}, "response_fields": ["generation_settings/logit_bias",
                                                                                     "generation_settings/dry_base"]}
    assert await post(client, "/completion", body) == {"generation_settings/logit_bias": [{"bias": 1.5, "token": 5}],
                                                      "generation_settings/dry_base": 1.75}


async def test_props_states_them_too(stack):
    client, _ = stack
    params = orjson.loads(await (await client.get("/props")).read())["default_generation_settings"]["params"]
    assert KEYS <= params.keys()
    assert {key: params[key] for key in OFF} == OFF and params["logit_bias"] == [] and params["n_probs"] == 0
