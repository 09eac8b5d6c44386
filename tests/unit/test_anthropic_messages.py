"""Gateway over the fake scheduler: Anthropic /v1/messages answers, streamed and not, and the prompt each renders
(the same as the equivalent /v1 chat request: one generation path); tool use: test_anthropic_tool_use.py."""
import asyncio

import orjson
import pytest

from gateway.anthropic_shape import thinking_signature
from gateway.app import CONFIG_KEY
from tests.unit.anthropic_sse import accumulate, parse_events

USER = [{"role": "user", "content": "Hi"}]
BASE = {"model": "fake-model", "max_tokens": 64, "messages": USER, "thinking": {"type": "disabled"}}
# Thinking on; "enabled" would need max_tokens above its budget_tokens (at least 1024): see test_anthropic_thinking_budget.
ON = {"type": "adaptive"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"name": "get_weather", "description": "Weather of a city", "input_schema": SCHEMA}]
OPENAI_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                                  "parameters": SCHEMA}}]
BILLING = "x-anthropic-billing-header: cc_version=2.1.177.01c; cc_entrypoint=cli; "
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"


async def both(client, body: dict) -> tuple[dict, dict]:
    """(non-streamed message, streamed message as a client accumulates it) for one body."""
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    whole = await response.json()
    response = await client.post("/v1/messages", json={**body, "stream": True})
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/event-stream")
    return whole, accumulate(parse_events(await response.read()))


def without_ids(message: dict) -> dict:
    blocks = [{**block, "id": "toolu"} if block["type"] == "tool_use" else block for block in message["content"]]
    return {**message, "id": "msg", "content": blocks}


def prompt_of(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


@pytest.mark.parametrize("reply, change, content, stop", [
    ("Hello world", {}, [{"type": "text", "text": "Hello world"}], ("end_turn", None)),
    ("Let me see.</think>\n\nHello world", {"thinking": ON},
     [{"type": "thinking", "thinking": "Let me see.", "signature": thinking_signature("Let me see.")},
      {"type": "text", "text": "Hello world"}],
     ("end_turn", None)),
    ("Hello world", {"stop_sequences": ["nope", " wor"]}, [{"type": "text", "text": "Hello"}],
     ("stop_sequence", " wor")),
    ("I will check.\n\n" + CALL, {"tools": TOOLS},
     [{"type": "text", "text": "I will check."},
      {"type": "tool_use", "id": "toolu", "name": "get_weather", "input": {"city": "Paris"}}], ("tool_use", None)),
    (CALL, {"tools": TOOLS, "tool_choice": {"type": "none"}}, [{"type": "text", "text": CALL}], ("end_turn", None)),
], ids=["text", "thinking", "stop sequence", "tool use", "tool choice none"])
async def test_streamed_and_whole_agree(stack, reply, change, content, stop):
    client, fake = stack
    fake.script.reply = reply
    whole, streamed = await both(client, {**BASE, **change})
    assert whole["id"].startswith("msg_") and whole["type"] == "message" and whole["role"] == "assistant"
    assert without_ids(whole)["content"] == content and (whole["stop_reason"], whole["stop_sequence"]) == stop
    assert without_ids(streamed) == without_ids(whole) and whole["model"] == "fake-model"
    tool_ids = [block["id"] for block in whole["content"] if block["type"] == "tool_use"]
    assert all(tool_id.startswith("toolu_") and len(tool_id) > 10 for tool_id in tool_ids)


@pytest.mark.parametrize("reply, max_tokens", [("Let me see.</think>\n\nHello world", 64), ("Let me see more", 3)],
                         ids=["then text", "cut by max_tokens"])
async def test_thinking_blocks_are_signed(stack, reply, max_tokens):
    """Each thinking block ends with a non-empty signature_delta just before its content_block_stop, and the whole
    answer's block carries the same signature (clients refuse or drop thinking blocks signed with "")."""
    client, fake = stack
    fake.script.reply = reply
    body = {**BASE, "thinking": ON, "max_tokens": max_tokens}
    events = parse_events(await (await client.post("/v1/messages", json={**body, "stream": True})).read())
    names = [(name, payload.get("delta", {}).get("type")) for name, payload in events]
    stop = names.index(("content_block_stop", None))
    assert names[stop - 1] == ("content_block_delta", "signature_delta") and events[stop][1]["index"] == 0
    signature = events[stop - 1][1]["delta"]["signature"]
    assert signature.startswith("sig_") and len(signature) > 40
    whole = await (await client.post("/v1/messages", json=body)).json()
    assert whole["content"][0]["type"] == "thinking" and whole["content"][0]["signature"] == signature


async def test_max_tokens_stop(stack):
    client, fake = stack
    whole, streamed = await both(client, {**BASE, "max_tokens": 1})
    assert whole["stop_reason"] == "max_tokens" and whole["stop_sequence"] is None
    assert whole["usage"]["output_tokens"] == 1 and "Hello world".startswith(whole["content"][0]["text"])
    assert without_ids(streamed) == without_ids(whole)


async def test_usage_is_the_engine_count_and_count_tokens_agrees(stack):
    client, fake = stack
    body = {**BASE, "system": "Be brief.", "tools": TOOLS}
    whole = await (await client.post("/v1/messages", json=body)).json()
    num_prompt = len(fake.script.requests[-1].prompt_token_ids)
    chat = {"messages": [{"role": "system", "content": "Be brief."}, *USER], "tools": OPENAI_TOOLS,
            "max_tokens": 64, "enable_thinking": False}
    usage = (await (await client.post("/v1/chat/completions", json=chat)).json())["usage"]
    assert whole["usage"] == {"input_tokens": usage["prompt_tokens"], "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": 0, "output_tokens": usage["completion_tokens"],
                              "output_tokens_details": {"thinking_tokens": 0}}
    assert whole["usage"]["input_tokens"] == num_prompt and whole["usage"]["output_tokens"] == 3
    counted = await client.post("/v1/messages/count_tokens", json={k: body[k] for k in (
        "model", "messages", "system", "tools", "thinking")})
    assert counted.status == 200 and await counted.json() == {"input_tokens": num_prompt}
    events = parse_events(await (await client.post("/v1/messages", json={**body, "stream": True})).read())
    assert events[0][1]["message"]["usage"] == {**whole["usage"], "output_tokens": 0}
    assert events[-2][1]["usage"] == whole["usage"]


async def test_prefix_cache_hits_are_cache_reads(stack):
    """As Anthropic counts a prompt (and vLLM maps it): input + cache reads + cache writes = the prompt tokens."""
    client, fake = stack
    fake.script.cached_tokens = 16
    whole = await (await client.post("/v1/messages", json=BASE)).json()
    num_prompt = len(fake.script.requests[-1].prompt_token_ids)
    assert whole["usage"] == {"input_tokens": num_prompt - 16, "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": 16, "output_tokens": 3,
                              "output_tokens_details": {"thinking_tokens": 0}}
    events = parse_events(await (await client.post("/v1/messages", json={**BASE, "stream": True})).read())
    assert events[0][1]["message"]["usage"] == {**whole["usage"], "output_tokens": 0}
    assert events[-2][1]["usage"] == whole["usage"]


async def chat_prompt(client, fake, chat: dict) -> list:
    response = await client.post("/v1/chat/completions", json={"max_tokens": 8, **chat})
    assert response.status == 200, await response.text()
    return list(fake.script.requests[-1].prompt_token_ids)


@pytest.mark.parametrize("anthropic, chat", [
    ({"system": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
     {"messages": [{"role": "system", "content": "Be brief."}, *USER], "enable_thinking": False}),
    ({"thinking": ON}, {"messages": USER, "enable_thinking": True}),
    ({"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}},
     {"messages": USER, "reasoning_effort": "xhigh"}),
    ({"thinking": None}, {"messages": USER}),
    ({"messages": [*USER, {"role": "assistant", "content": [{"type": "text", "text": "Sure,"}]}]},
     {"messages": [*USER, {"role": "assistant", "content": "Sure,"}], "continue_final_message": True,
      "enable_thinking": False}),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": ""},
                                                {"type": "text", "text": " there"}]}]},
     {"messages": [{"role": "user", "content": "Hi there"}], "enable_thinking": False}),
    # Claude Code (since 2.1.154) sends system-role messages inside messages, also after the last user turn.
    ({"system": [{"type": "text", "text": "Be brief."}], "messages": [
        {"role": "system", "content": "Agents: none."}, *USER,
        {"role": "system", "content": [{"type": "text", "text": "Skills: "}, {"type": "text", "text": "none."}]}]},
     {"messages": [{"role": "system", "content": "Be brief.\n\nAgents: none.\n\nSkills: none."}, *USER],
      "enable_thinking": False}),
    ({"messages": [*USER, {"role": "assistant", "content": "Sure,"}, {"role": "system", "content": "Be brief."}]},
     {"messages": [{"role": "system", "content": "Be brief."}, *USER, {"role": "assistant", "content": "Sure,"}],
      "continue_final_message": True, "enable_thinking": False}),
    # Claude Code (since 2.1.154) also sends the roles ctx and msg (vllm#44000): user turns, as vLLM reads them.
    ({"messages": [{"role": "ctx", "content": "Repo: demo"},
                   {"role": "msg", "content": [{"type": "text", "text": "Hi"}]}]},
     {"messages": [{"role": "user", "content": "Repo: demo"}, *USER], "enable_thinking": False}),
    # Claude Code's billing line changes with every request (cch=): left out, the prompt's prefix stays cacheable.
    ({"system": [{"type": "text", "text": f"{BILLING}cch=36ee5;", "cache_control": {"type": "ephemeral"}},
                 {"type": "text", "text": "Be brief."}]},
     {"messages": [{"role": "system", "content": "Be brief."}, *USER], "enable_thinking": False}),
    ({"system": f"{BILLING}cch=0aaa9;\nBe brief."},
     {"messages": [{"role": "system", "content": "Be brief."}, *USER], "enable_thinking": False}),
], ids=["system blocks", "thinking on", "adaptive max effort", "thinking absent", "prefill", "text blocks",
        "system messages", "prefill before a system message", "ctx and msg roles", "billing block", "billing line"])
async def test_prompt_is_the_chat_prompt(stack, anthropic, chat):
    client, fake = stack
    body = {key: value for key, value in {**BASE, **anthropic}.items() if value is not None}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    ids = list(fake.script.requests[-1].prompt_token_ids)
    assert ids == await chat_prompt(client, fake, chat)


async def test_null_optional_fields_are_absent(stack):
    """As vLLM's and Ollama's layers read them (clients that build bodies from None defaults send them)."""
    client, fake = stack
    nulls = dict.fromkeys(("system", "tools", "tool_choice", "stop_sequences", "temperature", "top_p", "top_k",
                           "output_config", "stream", "metadata"))
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        response = await client.post(path, json={**BASE, **nulls})
        assert response.status == 200, await response.text()
    assert (await response.json())["input_tokens"] == len(fake.script.requests[-1].prompt_token_ids)
    assert list(fake.script.requests[-1].prompt_token_ids) == await chat_prompt(
        client, fake, {"messages": USER, "enable_thinking": False})


async def test_thinking_on_and_off_in_the_prompt(stack):
    client, fake = stack
    await client.post("/v1/messages", json={**BASE, "thinking": ON})
    assert prompt_of(fake).endswith("<|im_start|>assistant\n<think>\n")
    fake.script.reply = "Hello world"
    off = await (await client.post("/v1/messages", json=BASE)).json()
    assert prompt_of(fake).endswith("<think>\n\n</think>\n\n")
    assert off["content"] == [{"type": "text", "text": "Hello world"}]


async def test_output_config_format_constrains_the_answer(stack):
    client, fake = stack
    fake.script.reply = '{"city": "Paris"}'
    body = {**BASE, "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}}}
    answer = await (await client.post("/v1/messages", json=body)).json()
    assert answer["content"] == [{"type": "text", "text": '{"city": "Paris"}'}]
    assert '"city"' in fake.script.requests[-1].constraint.grammar


async def test_headers_of_anthropic_clients_are_accepted(stack):
    client, _ = stack
    headers = {"x-api-key": "anything", "anthropic-version": "2023-06-01", "anthropic-beta": "tools-2024-04-04"}
    response = await client.post("/v1/messages/", json={**BASE, "metadata": {"user_id": "u1"}}, headers=headers)
    assert response.status == 200 and (await response.json())["content"][0]["text"] == "Hello world"


async def test_silent_stream_gets_ping_events(stack):
    client, fake = stack
    fake.script.delay_s = 0.4
    client.app[CONFIG_KEY].sse_keepalive_s = 0.1
    events = parse_events(await (await client.post("/v1/messages", json={**BASE, "stream": True})).read())
    assert ("ping", {"type": "ping"}) in events
    assert accumulate(events)["content"] == [{"type": "text", "text": "Hello world"}]


async def test_client_that_leaves_cancels_the_generation(stack):
    client, fake = stack
    fake.script.reply, fake.script.delay_s = "Hello world " * 40, 0.05
    response = await client.post("/v1/messages", data=orjson.dumps({**BASE, "max_tokens": 200, "stream": True}))
    await response.content.readline()
    response.close()
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(client.post("/v1/messages", json={**BASE, "max_tokens": 200}), timeout=0.4)
    for _ in range(60):
        if fake.num_running == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{fake.num_running} generations still running after their clients left")


async def test_claude_codes_ctx_and_msg_roles_are_user_turns(stack):
    """Claude Code >= 2.1.154 sends turns with the roles ctx and msg (vllm#44000); they were a 400 'messages.0.role:
    'ctx' is not one of [...]' for every request. vLLM reads them as user turns (AnthropicMessage.normalize_role)."""
    client, fake = stack
    body = {**BASE, "messages": [{"role": "ctx", "content": "Repo: demo"}, {"role": "msg", "content": "Hi"}]}
    answer = await (await client.post("/v1/messages", json=body)).json()
    assert answer["content"] == [{"type": "text", "text": "Hello world"}] and answer["stop_reason"] == "end_turn"
    assert prompt_of(fake).startswith("<|im_start|>user\nRepo: demo<|im_end|>\n<|im_start|>user\nHi<|im_end|>")
    counted = await client.post("/v1/messages/count_tokens", json={k: v for k, v in body.items() if k != "max_tokens"})
    assert await counted.json() == {"input_tokens": answer["usage"]["input_tokens"]}
