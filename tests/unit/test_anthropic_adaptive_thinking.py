"""Gateway over the fake scheduler: Claude Code (>= 2.1.252, routatic/proxy#171) sends thinking {"type": "adaptive",
"budget_tokens": 0} on every request. budget_tokens bounds "enabled" thinking only; with "adaptive" Anthropic ignores
it, so the request is served with thinking on. It was a 400 "thinking.budget_tokens: 0 is less than the minimum of 1"
on /v1/messages and count_tokens, i.e. every Claude Code turn."""
import pytest

from gateway.anthropic_shape import thinking_signature
from tests.unit.anthropic_sse import accumulate, parse_events
from tests.unit.test_anthropic_errors import BAD_MESSAGES, expect_error
from tests.unit.test_anthropic_messages import BASE, prompt_of

CLAUDE_CODE = {"type": "adaptive", "budget_tokens": 0}


# display "updates": Claude Code 2.1.332 sends {"type": "adaptive", "display": "updates"} (the SDKs'
# BetaThinkingConfigAdaptiveParam.display: "summarized" | "omitted" | "updates"); its 400 cost every session two failed
# requests before Claude Code retried without it. A config key sent as null is absent (the SDKs type them Optional).
@pytest.mark.parametrize("thinking", [CLAUDE_CODE, {**CLAUDE_CODE, "budget_tokens": 31999},
                                      {**CLAUDE_CODE, "display": "summarized"}, {"type": "adaptive", "display": "updates"},
                                      {"type": "adaptive", "display": None, "budget_tokens": None}],
                         ids=["budget 0", "a budget", "display summarized", "display updates", "nulls"])
async def test_adaptive_thinking_with_a_budget_is_served_thinking(stack, thinking):
    client, fake = stack
    fake.script.reply = "Let me see.</think>\n\nHello world"
    body = {**BASE, "thinking": thinking}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    whole = await response.json()
    assert whole["content"] == [
        {"type": "thinking", "thinking": "Let me see.", "signature": thinking_signature("Let me see.")},
        {"type": "text", "text": "Hello world"}]
    assert prompt_of(fake).endswith("<|im_start|>assistant\n<think>\n")
    streamed = accumulate(parse_events(await (await client.post("/v1/messages",
                                                               json={**body, "stream": True})).read()))
    assert streamed["content"] == whole["content"]
    counted = await (await client.post("/v1/messages/count_tokens", json=body)).json()
    assert counted == {"input_tokens": whole["usage"]["input_tokens"]}


@pytest.mark.parametrize("thinking, fragment", [
    ({"type": "enabled", "budget_tokens": 0}, "thinking.budget_tokens: 0 is less than the minimum of 1"),
    ({"type": "adaptive", "budget_tokens": -1}, "thinking.budget_tokens: -1 is less than the minimum of 0"),
    ({"type": "adaptive", "budget_tokens": "0"}, 'thinking.budget_tokens: "0" is not of type "integer"'),
    ({"type": "adaptive", "display": "full"},
     'thinking.display: "full" is not one of ["summarized", "omitted", "updates"]'),
    ({"type": "enabled", "budget_tokens": None}, "thinking.budget_tokens: Field required"),
    ({"budget_tokens": 0}, "thinking.type: Field required"),
], ids=["enabled budget 0", "negative", "string", "unknown display", "enabled budget null", "no type"])
async def test_a_thinking_field_of_the_wrong_form_is_a_400(stack, thinking, fragment):
    client, fake = stack
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        await expect_error(await client.post(path, json={**BASE, "thinking": thinking}), 400, BAD_MESSAGES, fragment)
    assert fake.script.requests == []


@pytest.mark.parametrize("thinking", [{**CLAUDE_CODE, "display": "omitted"},
                                      {"type": "enabled", "budget_tokens": 1024, "display": "omitted"}],
                         ids=["adaptive", "enabled"])
async def test_omitted_thinking_is_sent_as_its_signature_only(stack, thinking):
    """display "omitted": the thinking block is there, with "" for its text and the signature of what was thought,
    and the stream sends no thinking_delta, only the signature_delta (Anthropic's form)."""
    client, fake = stack
    fake.script.reply = "Let me see.</think>\n\nHello world"
    body = {**BASE, "max_tokens": 2000, "thinking": thinking}
    whole = await (await client.post("/v1/messages", json=body)).json()
    assert whole["content"] == [{"type": "thinking", "thinking": "",
                                 "signature": thinking_signature("Let me see.", omitted=True)},
                                {"type": "text", "text": "Hello world"}]
    events = parse_events(await (await client.post("/v1/messages", json={**body, "stream": True})).read())
    deltas = [payload["delta"]["type"] for name, payload in events if name == "content_block_delta"]
    assert "thinking_delta" not in deltas and deltas[0] == "signature_delta"
    assert accumulate(events)["content"] == whole["content"]


async def test_config_keys_sent_as_null_are_absent(stack):
    """output_config.effort / .format and tool_choice.disable_parallel_tool_use sent as null (Optional in the SDKs'
    OutputConfigParam, ...) are served as absent, as a top-level null field is: they were 400s ("output_config.effort:
    null is not one of [...]")."""
    client, fake = stack
    fake.script.reply = "Hello world"
    tool = {"name": "f", "input_schema": {"type": "object", "properties": {}}}
    body = {**BASE, "thinking": {"type": "disabled"}, "output_config": {"effort": None, "format": None}, "tools": [tool],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": None}}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    assert (await response.json())["content"] == [{"type": "text", "text": "Hello world"}]
    plain = {**BASE, "thinking": {"type": "disabled"}, "tools": [tool]}
    await client.post("/v1/messages", json=plain)
    assert fake.script.requests[0].prompt_token_ids == fake.script.requests[1].prompt_token_ids


async def test_omitted_thinking_comes_back_through_its_signature(stack):
    """display "omitted" (Claude Code 2.1.332 sends it with --output-format json): the client sends the thinking block
    back as "" and its signature, which carries the thinking, so the next step of the tool loop renders the turn's
    thinking as a client that got the text does ("a signature is returned for multi-turn continuity", the SDKs'
    ThinkingConfigAdaptiveParam.display). It rendered an empty <think></think>: the model lost its reasoning."""
    client, fake = stack
    fake.script.reply = "Let me see.</think>\n\n<tool_call>\n<function=f>\n</function>\n</tool_call>"
    tool = {"name": "f", "input_schema": {"type": "object", "properties": {}}}
    body = {**BASE, "max_tokens": 200, "tools": [tool], "thinking": {"type": "adaptive", "display": "omitted"}}
    turn = (await (await client.post("/v1/messages", json=body)).json())["content"]
    assert turn[0]["thinking"] == "" and turn[1]["type"] == "tool_use"
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": turn[1]["id"], "content": "done"}]}
    clear = [{**turn[0], "thinking": "Let me see.", "signature": thinking_signature("Let me see.")}, turn[1]]
    prompts = []
    for content in (turn, clear):
        messages = [*BASE["messages"], {"role": "assistant", "content": content}, result]
        await client.post("/v1/messages", json={**body, "messages": messages})
        prompts.append(prompt_of(fake))
    assert prompts[0] == prompts[1] and "<think>\nLet me see.\n</think>" in prompts[0]
    bad = [{**turn[0], "signature": turn[0]["signature"][:-3] + "!!!"}, turn[1]]
    await expect_error(await client.post("/v1/messages", json={**body, "messages": [
        *BASE["messages"], {"role": "assistant", "content": bad}, result]}), 400, BAD_MESSAGES,
        "messages.1.content.0.signature is not reasoning this server wrote")
