"""/v1 chat, LM Studio's /api/v0 and the Responses API take as many tools as the context holds, as vLLM's and LM
Studio's servers do (their request models cap no tool list); OpenAI's own limit of 128 was a 400 here, so opencode or
Cline with a few MCP servers (142 tools, anomalyco/opencode#4909 against OpenAI) could not send a single request (fake
scheduler)."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

USER = [{"role": "user", "content": "Hi"}]
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
NAMES = [f"mcp__srv__tool_{i}" for i in range(142)]
CALL = "<tool_call>\n<function=mcp__srv__tool_141>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>"


def chat_tools(names: list) -> list:
    return [{"type": "function", "function": {"name": name, "parameters": SCHEMA}} for name in names]


def request(path: str, names: list) -> dict:
    if path == "/v1/responses":
        return {"input": "Hi", "tools": [{"type": "function", "name": name, "parameters": SCHEMA} for name in names]}
    return {"messages": USER, "tools": chat_tools(names)}


def called(path: str, answer: dict) -> list:
    if path == "/v1/responses":
        return [(item["name"], item["arguments"]) for item in answer["output"] if item["type"] == "function_call"]
    return [(call["function"]["name"], call["function"]["arguments"])
            for call in answer["choices"][0]["message"]["tool_calls"]]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions", "/v1/responses"])
async def test_more_tools_than_openais_128_are_served(path):
    fake = FakeServing(build_tokenizer(), max_context_len=65536)
    fake.script.reply = CALL
    async with fake_gateway(fake) as (client, _):
        response = await client.post(path, json=request(path, NAMES))
        answer = await response.json()
        assert response.status == 200, answer
        assert called(path, answer) == [("mcp__srv__tool_141", '{"path":"a"}')]
        prompt = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
        assert "mcp__srv__tool_0" in prompt and "mcp__srv__tool_141" in prompt


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/v0/chat/completions", "/v1/responses"])
async def test_more_tools_than_the_context_holds_are_too_long(path):
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    async with fake_gateway(fake) as (client, _):
        response = await client.post(path, json=request(path, [f"t{i}" for i in range(2100)]))
        error = (await response.json())["error"]
        assert response.status == 400 and error["param"] == "tools", error
        expected = ("The number of tokens to keep from the initial prompt is greater than the context length (n_keep: "
                    "at least 2100>= n_ctx: 2048)" if path.startswith("/api/v0/") else
                    "This model's maximum context length is 2048 tokens. However, your prompt contains at least 2100 "
                    "tokens")
        assert error["message"].startswith(expected), error
        assert fake.script.requests == []
