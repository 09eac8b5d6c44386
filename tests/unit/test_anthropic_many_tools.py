"""Gateway over the fake scheduler: /v1/messages takes as many tools as the context holds, as Anthropic, vLLM and
Ollama do (Claude Code with a few MCP servers sends 160 and more); the /v1 routes too (test_many_tools)."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

USER = [{"role": "user", "content": "Hi"}]
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = [{"name": f"mcp__srv__tool_{i}", "description": "d", "input_schema": SCHEMA} for i in range(160)]
BODY = {"model": "fake-model", "max_tokens": 16, "messages": USER, "thinking": {"type": "disabled"}, "tools": TOOLS}


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=65536)
    async with fake_gateway(fake) as pair:
        yield pair


async def test_more_tools_than_openais_128_are_served(stack):
    client, fake = stack
    response = await client.post("/v1/messages", json=BODY)
    assert response.status == 200, await response.text()
    answer = await response.json()
    assert answer["content"] == [{"type": "text", "text": "Hello world"}] and answer["stop_reason"] == "end_turn"
    prompt = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    assert "mcp__srv__tool_0" in prompt and "mcp__srv__tool_159" in prompt
    counted = await client.post("/v1/messages/count_tokens", json={k: v for k, v in BODY.items() if k != "max_tokens"})
    assert counted.status == 200, await counted.text()
    assert await counted.json() == {"input_tokens": answer["usage"]["input_tokens"]}


async def test_more_tools_than_the_context_holds_are_too_long():
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    tools = [{**TOOLS[0], "name": f"t{i}"} for i in range(2100)]
    async with fake_gateway(fake) as (client, _):
        for path in ("/v1/messages", "/v1/messages/count_tokens"):
            response = await client.post(path, json={**BODY, "tools": tools})
            assert response.status == 400, await response.text()
            assert (await response.json())["error"] == {
                "type": "invalid_request_error",
                "message": "prompt is too long: 2100 tokens > 2048 maximum (a lower bound, counted before tokenizing)"}
        assert fake.script.requests == []
