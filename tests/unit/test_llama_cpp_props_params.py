"""GET /props' default_generation_settings.params and /completion's generation_settings are written as llama.cpp's
task params to_json writes them (tools/server/server-task.cpp): max_tokens beside n_predict, n_keep and n_discard, and
/props names the reasoning split (reasoning_format). Clients read params["max_tokens"] for the default output limit
(a KeyError here before) and take a reasoning_format other than "none" for a thinking model."""
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway


async def test_props_params_carry_llama_cpps_max_tokens_and_reasoning_format():
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=256)) as (client, _):
        params = (await (await client.get("/props")).json())["default_generation_settings"]["params"]
        completion = await (await client.post("/completion", json={"prompt": "hi", "n_predict": 2})).json()
    assert (params["n_predict"], params["max_tokens"], params["n_keep"], params["n_discard"]) == (-1, -1, 0, 0)
    assert params["reasoning_format"] == "deepseek"
    assert completion["generation_settings"]["max_tokens"] == completion["generation_settings"]["n_predict"] == 2
