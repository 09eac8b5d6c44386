"""/v1/responses over the fake scheduler: the Response object, its stream events, function-call round trips,
structured output and max_output_tokens, all through the chat route's one generation path."""
import orjson
import pytest

from gateway.fake_scheduler import build_tokenizer

TOKENIZER = build_tokenizer()
TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather of a city", "strict": None,
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
NO_THINK = {"reasoning": {"effort": "none"}}


async def post(client, body: dict) -> tuple[int, dict]:
    response = await client.post("/v1/responses", data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


async def stream(client, body: dict) -> list:
    """(event name, data) of every SSE event of a streamed response."""
    response = await client.post("/v1/responses", data=orjson.dumps({**body, "stream": True}))
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/event-stream")
    events = []
    for block in (await response.read()).decode().split("\n\n"):
        if block:
            name, data = block.split("\n")
            assert name.startswith("event: ") and data.startswith("data: "), block
            events.append((name[7:], orjson.loads(data[6:])))
    return events


def prompt_of(fake) -> str:
    return TOKENIZER.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


def num_tokens(text: str) -> int:
    return len(TOKENIZER.encode(text).ids)


def without_ids(body):
    """body with the per-request random parts (ids, times) blanked, to compare two runs."""
    if isinstance(body, dict):
        return {k: ("*" if k in ("id", "call_id", "item_id", "created_at", "completed_at") else without_ids(v))
                for k, v in body.items()}
    return [without_ids(v) for v in body] if isinstance(body, list) else body


async def test_a_string_input_answers_with_one_message_item(stack):
    client, fake = stack
    status, body = await post(client, {"model": "fake-model", "input": "Hi", "instructions": "Be brief", **NO_THINK})
    assert status == 200, body
    message = body["output"][0]
    assert body["object"] == "response" and body["id"].startswith("resp_") and body["status"] == "completed"
    assert body["model"] == "fake-model" and body["error"] is None and body["incomplete_details"] is None
    assert len(body["output"]) == 1 and message["id"].startswith("msg_")
    assert {k: v for k, v in message.items() if k != "id"} == {
        "type": "message", "role": "assistant", "status": "completed",
        "content": [{"type": "output_text", "text": "Hello world", "annotations": [], "logprobs": []}]}
    assert body["instructions"] == "Be brief" and body["store"] is True and body["tools"] == []
    prompt = prompt_of(fake)
    assert prompt.startswith("<|im_start|>system\nBe brief<|im_end|>\n<|im_start|>user\nHi<|im_end|>")
    assert prompt.endswith("<think>\n\n</think>\n\n")


async def test_usage_counts_the_prompt_the_output_and_the_reasoning(stack):
    client, fake = stack
    fake.script.reply = "<think>Let me see</think>Hello world"
    status, body = await post(client, {"input": "Hi"})
    reasoning, message = body["output"]
    assert status == 200 and reasoning["type"] == "reasoning" and reasoning["id"].startswith("rs_")
    assert reasoning["summary"] == [] and reasoning["content"] == [{"type": "reasoning_text", "text": "Let me see"}]
    assert message["content"][0]["text"] == "Hello world"
    num_prompt, num_output = len(fake.script.requests[-1].prompt_token_ids), num_tokens(fake.script.reply) + 1
    assert body["usage"] == {"input_tokens": num_prompt,
                             "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                             "output_tokens": num_output,
                             "output_tokens_details": {"reasoning_tokens": num_tokens("Let me see")},
                             "total_tokens": num_prompt + num_output}


@pytest.mark.parametrize("reply, extra", [
    ("Hello world", NO_THINK),
    ("<think>Let me see</think>Hello world", {}),
    (CALL, {"tools": TOOLS, **NO_THINK}),
    ("Checking.\n\n" + CALL, {"tools": TOOLS, **NO_THINK}),
], ids=["text", "reasoning", "call", "text-and-call"])
async def test_streamed_and_non_streamed_agree(stack, reply, extra):
    client, fake = stack
    fake.script.reply = reply
    status, body = await post(client, {"input": "Weather in Paris?", **extra})
    events = await stream(client, {"input": "Weather in Paris?", **extra})
    assert status == 200
    assert [name for name, _ in events] == [data["type"] for _, data in events]
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert events[0][0] == "response.created" and events[1][0] == "response.in_progress"
    assert events[0][1]["response"]["status"] == "in_progress" and events[0][1]["response"]["output"] == []
    assert events[-1][0] == "response.completed"
    final = events[-1][1]["response"]
    assert without_ids(final) == without_ids(body)
    done = [data["item"] for name, data in events if name == "response.output_item.done"]
    assert done == final["output"]


async def test_stream_events_build_each_item_in_order(stack):
    client, fake = stack
    fake.script.reply = "<think>Hm</think>Hello world"
    events = await stream(client, {"input": "Hi"})
    names = [name for name, _ in events]
    assert names == ["response.created", "response.in_progress",
                     "response.output_item.added", "response.content_part.added",
                     "response.reasoning_text.delta", "response.reasoning_text.delta",
                     "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
                     "response.output_item.added", "response.content_part.added",
                     "response.output_text.delta", "response.output_text.delta",
                     "response.output_text.done", "response.content_part.done", "response.output_item.done",
                     "response.completed"]
    by_name = {name: data for name, data in events}
    message_id = by_name["response.output_text.done"]["item_id"]
    assert "".join(d["delta"] for n, d in events if n == "response.output_text.delta") == "Hello world"
    assert "".join(d["delta"] for n, d in events if n == "response.reasoning_text.delta") == "Hm"
    assert by_name["response.output_text.done"] == {
        "type": "response.output_text.done", "item_id": message_id, "output_index": 1, "content_index": 0,
        "text": "Hello world", "logprobs": [], "sequence_number": 13}
    assert events[9][1]["item"] == {"id": message_id, "type": "message", "role": "assistant",
                                    "status": "in_progress", "content": []}


async def test_a_function_call_streams_as_one_item(stack):
    """One item: added with its name, its arguments in function_call_arguments.delta pieces as the model writes them,
    then done."""
    client, fake = stack
    fake.script.reply = CALL
    events = await stream(client, {"input": "Weather in Paris?", "tools": TOOLS, **NO_THINK})
    names = [name for name, _ in events][2:]
    num_deltas = names.count("response.function_call_arguments.delta")
    assert num_deltas > 2 and names == ["response.output_item.added"] + [
        "response.function_call_arguments.delta"] * num_deltas + [
        "response.function_call_arguments.done", "response.output_item.done", "response.completed"]
    added, args_done, item_done = events[2][1], events[-3][1], events[-2][1]
    call = item_done["item"]
    assert call["type"] == "function_call" and call["id"].startswith("fc_") and call["call_id"].startswith("call_")
    assert (call["name"], call["arguments"], call["status"]) == ("get_weather", '{"city":"Paris"}', "completed")
    assert added["item"] == {**call, "arguments": "", "status": "in_progress"}
    pieces = "".join(data["delta"] for _, data in events[3:3 + num_deltas])
    assert pieces == args_done["arguments"] == '{"city":"Paris"}' and args_done["name"] == "get_weather"
    assert {data["item_id"] for _, data in events[3:-2]} == {call["id"]}


async def test_a_function_call_round_trip(stack):
    client, fake = stack
    fake.script.reply = CALL
    status, first = await post(client, {"input": "Weather in Paris?", "tools": TOOLS, **NO_THINK})
    call = first["output"][0]
    assert status == 200 and call["type"] == "function_call"
    fake.script.reply = "It is sunny."
    status, second = await post(client, {"tools": TOOLS, **NO_THINK, "input": [
        {"role": "user", "content": "Weather in Paris?"}, call,
        {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny, 24 C"}]})
    assert status == 200 and second["output"][0]["content"][0]["text"] == "It is sunny."
    prompt = prompt_of(fake)
    assert ("<|im_start|>assistant\n<think>\n\n</think>\n\n" + CALL + "<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nsunny, 24 C\n</tool_response><|im_end|>") in prompt


HOSTED = [{"type": "web_search", "search_context_size": "medium"}, {"type": "file_search", "vector_store_ids": ["v"]}]


async def test_hosted_tools_are_left_out_and_function_tools_served(stack):
    """Codex CLI sends web_search beside its function tools: vLLM and llama.cpp leave the ones they cannot run out of
    the prompt and answer (this was a 400 'only function tools are supported'); custom tools are served
    (test_responses_custom_tools)."""
    client, fake = stack
    fake.script.reply = CALL
    status, body = await post(client, {"input": "Weather in Paris?", "tools": HOSTED + TOOLS, **NO_THINK})
    assert status == 200, body
    assert [(item["type"], item["name"], item["arguments"]) for item in body["output"]] == [
        ("function_call", "get_weather", '{"city":"Paris"}')]
    assert body["tools"] == HOSTED + TOOLS
    prompt = prompt_of(fake)
    assert '"get_weather"' in prompt and "file_search" not in prompt and "web_search" not in prompt
    status, body = await post(client, {"input": "x", "tools": HOSTED, "tool_choice": "required"})
    assert status == 400 and body["error"]["param"] == "tool_choice", body
    assert "tool_choice 'required' needs a non-empty tools list" in body["error"]["message"]


async def test_earlier_reasoning_and_text_go_back_into_the_prompt(stack):
    client, fake = stack
    status, body = await post(client, {"input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be kind."}]},
        {"role": "user", "content": "Hi"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "greet"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "Hello!", "annotations": []}]},
        {"role": "user", "content": "Again"}]})
    assert status == 200, body
    assert prompt_of(fake).startswith("<|im_start|>system\nBe kind.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                                      "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nAgain<|im_end|>")


async def test_instructions_and_every_developer_item_are_one_leading_system_message(stack):
    """Codex-style: instructions + a developer item (+ a system item), and developer items later in the conversation
    (Codex's per-turn developer instructions), render as one leading system message, as Ollama folds them: the
    Qwen3.5 / 3.8 templates refuse a system or developer message that is not first (vllm#41114). A later developer
    item was rendered in place, a 400 'System message must be at the beginning' with those templates."""
    client, fake = stack
    status, body = await post(client, {"instructions": "Be brief.", "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Use tools."}]},
        {"role": "system", "content": "No emoji."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Now in French."}]},
        {"role": "user", "content": "Again"}]})
    assert status == 200, body
    prompt = prompt_of(fake)
    assert prompt.startswith("<|im_start|>system\nBe brief.\n\nUse tools.\n\nNo emoji.\n\nNow in French.<|im_end|>\n"
                             "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                             "<|im_start|>user\nAgain<|im_end|>\n")
    assert prompt.count("<|im_start|>system") == 1


@pytest.mark.parametrize("fmt, reply", [
    ({"type": "json_schema", "name": "city", "strict": True,
      "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
     '{"city": "Paris"}'),
    ({"type": "json_object"}, '{"a": 1}'),
], ids=["json_schema", "json_object"])
async def test_text_format_constrains_the_output(stack, fmt, reply):
    client, fake = stack
    fake.script.reply = reply
    status, body = await post(client, {"input": "Where?", "text": {"format": fmt}, **NO_THINK})
    assert status == 200 and body["output"][0]["content"][0]["text"] == reply
    assert body["text"] == {"format": fmt}
    constraint = fake.script.requests[-1].constraint
    assert constraint.kind == "lark" and "start" in constraint.grammar


@pytest.mark.parametrize("streamed", [False, True], ids=["plain", "stream"])
async def test_max_output_tokens_ends_incomplete(stack, streamed):
    client, fake = stack
    request = {"input": "Hi", "max_output_tokens": 1, **NO_THINK}
    if streamed:
        events = await stream(client, request)
        assert events[-1][0] == "response.incomplete"
        body = events[-1][1]["response"]
    else:
        status, body = await post(client, request)
        assert status == 200
    assert fake.script.requests[-1].max_tokens == 1
    assert body["status"] == "incomplete" and body["incomplete_details"] == {"reason": "max_output_tokens"}
    assert body["completed_at"] is None and body["max_output_tokens"] == 1
    assert body["usage"]["output_tokens"] == 1
    assert body["output"][0]["status"] == "incomplete" and body["output"][0]["content"][0]["text"] == "Hello"


async def test_sampling_fields_reach_the_scheduler_and_are_echoed(stack):
    client, fake = stack
    status, body = await post(client, {
        "input": "Hi", "temperature": 0.3, "top_p": 0.9, "seed": 7, "store": True, "metadata": {"k": "v"},
        "user": "u1", "parallel_tool_calls": False, "truncation": "disabled", "service_tier": "auto",
        "include": ["reasoning.encrypted_content"], "text": {"verbosity": "low"},
        "reasoning": {"effort": "high", "summary": "auto"}})
    sampling = fake.script.requests[-1].sampling
    assert status == 200 and (round(sampling.temperature, 3), round(sampling.top_p, 3)) == (0.3, 0.9)
    assert sampling.has_seed and sampling.seed == 7
    assert (body["temperature"], body["top_p"], body["metadata"], body["user"]) == (0.3, 0.9, {"k": "v"}, "u1")
    assert body["parallel_tool_calls"] is False and body["store"] is True
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["text"] == {"format": {"type": "text"}, "verbosity": "low"}
    assert "Reasoning effort is set to high." in prompt_of(fake)


async def test_the_caching_and_safety_keys_are_echoed(stack):
    """OpenAI's Response repeats prompt_cache_key, prompt_cache_retention and safety_identifier (openai-python
    types/responses/response.py); they were dropped from it, and a retention OpenAI does not list was taken."""
    client, _ = stack
    keys = {"prompt_cache_key": "user-42", "prompt_cache_retention": "24h", "safety_identifier": "hash-1"}
    status, body = await post(client, {"input": "Hi", **keys})
    assert status == 200 and {name: body[name] for name in keys} == keys
    status, body = await post(client, {"input": "Hi"})
    assert {name: body[name] for name in keys} == dict.fromkeys(keys)
    status, error = await post(client, {"input": "Hi", "prompt_cache_retention": "1w"})
    assert status == 400 and error["error"]["param"] == "prompt_cache_retention"
