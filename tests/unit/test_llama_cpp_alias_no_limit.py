"""llama.cpp's web UI sends `max_tokens: -1` with every chat by default (tools/server/webui settings-config.ts:
max_tokens -1, "Use -1 for infinite (no limit)"; chat.service.ts sends it to ./v1/chat/completions), and llama-server
reads max_tokens and max_completion_tokens as aliases of n_predict (server-task.cpp params_from_json_cmpl), whose -1
is no limit. Here every such chat was the 400 'max_tokens must be at least 1, got -1': the web UI could not chat at
all. A request that names llama.cpp's own fields now gets llama.cpp's reading (up to the context, as n_predict -1);
one that does not keeps vLLM's 400, as OpenAI and vLLM refuse -1 (and public case C11 asks of /v1/completions)."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

CONTEXT = 2048
USER = [{"role": "user", "content": "hi"}]
# The web UI's request with its default settings (settings-config.ts SETTING_CONFIG_DEFAULT, as chat.service.ts
# sendMessage builds the body: samplers split on ';', reasoning_format auto, return_progress on a stream).
WEBUI = {"messages": USER, "reasoning_format": "auto", "temperature": 0.8, "max_tokens": -1, "dynatemp_range": 0.0,
         "dynatemp_exponent": 1.0, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "xtc_probability": 0.0,
         "xtc_threshold": 0.1, "typ_p": 1.0, "repeat_last_n": 64, "repeat_penalty": 1.0, "presence_penalty": 0.0,
         "frequency_penalty": 0.0, "dry_multiplier": 0.0, "dry_base": 1.75, "dry_allowed_length": 2,
         "dry_penalty_last_n": -1, "samplers": ["top_k", "typ_p", "top_p", "min_p", "temperature"],
         "backend_sampling": False}


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=CONTEXT)
    fake.script.reply = "one two three four five"
    # A checkpoint default that a "no limit" must not take (llama.cpp reads no generation_config.json).
    fake.generation_config = '{"max_new_tokens": 2}'
    async with fake_gateway(fake) as pair:
        yield pair


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_web_uis_chat_runs_up_to_the_context(stack, stream):
    client, fake = stack
    body = {**WEBUI, "stream": stream, **({"return_progress": True} if stream else {})}
    response = await client.post("/v1/chat/completions", data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    text = (await response.read()).decode()
    # The reply ran to its end (stop), not to generation_config's 2 tokens.
    assert ('"finish_reason":"stop"' in text) if stream else orjson.loads(text)["choices"][0]["finish_reason"] == "stop"
    prompt = len(fake.script.requests[-1].prompt_token_ids)
    assert fake.script.requests[-1].max_tokens == CONTEXT - prompt


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", {"messages": USER, "max_completion_tokens": -1, "cache_prompt": True}),
    ("/v1/chat/completions", {"messages": USER, "max_tokens": -2, "n_probs": 0}),
    ("/v1/completions", {"prompt": "hi", "max_tokens": -1, "samplers": ["top_k", "temperature"]}),
], ids=["chat-max-completion-tokens", "chat-minus-two", "completions"])
async def test_a_llama_cpp_clients_alias_is_n_predict(stack, path, body):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    assert fake.script.requests[-1].max_tokens == CONTEXT - len(fake.script.requests[-1].prompt_token_ids)


@pytest.mark.parametrize("path, body, message", [
    ("/v1/chat/completions", {"messages": USER, "max_tokens": -1}, "max_tokens must be at least 1, got -1"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": -1},
     "max_tokens must be at least 1 (0 only with echo: true), got -1"),
    # An alias's -1 behind an n_predict the request also sends: n_predict is the limit, as llama-server reads it.
    ("/v1/chat/completions", {"messages": USER, "max_tokens": -1, "n_predict": 0},
     "n_predict must be -1 (no limit), -2 (until the context is full) or at least 1, got 0"),
], ids=["openai-chat", "openai-completions", "n-predict-wins"])
async def test_elsewhere_minus_one_stays_refused(stack, path, body, message):
    client, _ = stack
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 400
    assert (await response.json())["error"]["message"] == message
