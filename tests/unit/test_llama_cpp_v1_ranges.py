"""A llama.cpp client's sampling values on /v1 read in llama-server's ranges. llama-server reads its OpenAI-compatible
routes' sampling fields as /completion's (tools/server/server-task.cpp params_from_json_cmpl): any temperature at or
above 0 (none above 2 refused), top_k, top_p, min_p clamped into range (server-schema.cpp set_limits), top_p 0 the
most likely token. Its web UI sends the temperature and top_p the user typed with every chat; here /v1 answered a
2.5 or a 0 with OpenAI's 400 ('2.5 is greater than the maximum of 2'), where /completion already took them. A request
without llama.cpp's own fields keeps OpenAI's and vLLM's 400s."""
import orjson
import pytest

USER = [{"role": "user", "content": "hi"}]
# Fields llama.cpp's web UI sends with every chat (chat.service.ts), which mark the request as a llama.cpp client's.
WEBUI = {"reasoning_format": "auto", "samplers": ["top_k", "typ_p", "top_p", "min_p", "temperature"]}


async def sampling_of(client, fake, path: str, body: dict):
    response = await client.post(path, data=orjson.dumps(body))
    assert response.status == 200, await response.text()
    await response.read()
    return fake.script.requests[-1].sampling


@pytest.mark.parametrize("path, base", [("/v1/chat/completions", {"messages": USER, "max_tokens": 2}),
                                        ("/v1/completions", {"prompt": "hi", "max_tokens": 2})],
                         ids=["chat", "completions"])
async def test_a_llama_cpp_clients_values_are_read_as_llama_server_reads_them(stack, path, base):
    client, fake = stack
    high = await sampling_of(client, fake, path, {**base, **WEBUI, "temperature": 2.5})
    assert high.temperature == 2.5
    clamped = await sampling_of(client, fake, path, {**base, **WEBUI, "top_k": -5, "min_p": 1.5, "top_p": 0,
                                                     "temperature": -1})
    # top_k off, min_p held at 1, top_p 0 the most likely token (the least top_p the wire carries), greedy.
    assert clamped.top_k == 0 and clamped.min_p == 1.0 and 0 < clamped.top_p < 1e-6 and clamped.temperature == 0


@pytest.mark.parametrize("change, param", [({"temperature": 2.5}, "temperature"), ({"top_p": 0}, "top_p"),
                                           ({"min_p": 1.5}, "min_p")], ids=["temperature", "top-p", "min-p"])
async def test_elsewhere_they_stay_refused(stack, change, param):
    client, _ = stack
    response = await client.post("/v1/chat/completions", data=orjson.dumps({"messages": USER, **change}))
    assert response.status == 400 and (await response.json())["error"]["param"] == param
