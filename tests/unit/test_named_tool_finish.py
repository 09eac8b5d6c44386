"""finish_reason of a chat turn of tool calls: "tool_calls" when the model chose to call (tool_choice auto) or had to
call any tool (required), "stop" when tool_choice named the function, streamed or not, as OpenAI answers and vLLM
follows (vllm-project/vllm PR #25054 measured gpt-4o: named -> "stop" with and without stream; vLLM's chat serving
relabels only auto and required turns). The deprecated function_call naming a function is the same choice. A named
call cut by max_tokens stays "length"; /v1/messages (tool_use) and /v1/responses keep their own finish."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from tests.unit.tool_deltas import join_calls

TOKENIZER = build_tokenizer()
PARAMS = {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": PARAMS}}]
CALL = "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>"
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture
async def stack():
    fake = FakeServing(TOKENIZER, max_context_len=4096)
    fake.script.reply = CALL
    async with fake_gateway(fake) as pair:
        yield pair


async def _finish(client, body: dict, stream: bool) -> tuple:
    """(finish_reason, the calls' arguments) of the only choice."""
    body = {"messages": [{"role": "user", "content": "Weather?"}], "enable_thinking": False, **body, "stream": stream}
    raw = await (await client.post("/v1/chat/completions", json=body)).read()
    if not stream:
        choice = orjson.loads(raw)["choices"][0]
        message = choice["message"]
        calls = [c["function"] for c in message.get("tool_calls") or []] or [message.get("function_call")]
        return choice["finish_reason"], [c["arguments"] for c in calls if c]
    chunks = [orjson.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks]
    calls = [c["function"] for c in join_calls([c for d in deltas for c in d.get("tool_calls") or []])] or [
        c["function"] for c in join_calls([{"function": d["function_call"]} for d in deltas if d.get("function_call")])]
    return chunks[-1]["choices"][0]["finish_reason"], [c["arguments"] for c in calls]


CASES = {"named": ({"tools": TOOLS, "tool_choice": NAMED}, "stop"),
         "required": ({"tools": TOOLS, "tool_choice": "required"}, "tool_calls"),
         "auto": ({"tools": TOOLS}, "tool_calls"),
         "function_call named": ({"functions": [TOOLS[0]["function"]], "function_call": {"name": "get_weather"}},
                                 "stop"),
         "function_call auto": ({"functions": [TOOLS[0]["function"]]}, "function_call")}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("case", list(CASES))
async def test_the_finish_reason_of_a_turn_of_calls(stack, case, stream):
    client, _ = stack
    body, finish = CASES[case]
    assert await _finish(client, body, stream) == (finish, ['{"location":"Paris"}'])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_named_call_cut_by_max_tokens_is_length(stack, stream):
    client, _ = stack
    assert await _finish(client, {"tools": TOOLS, "tool_choice": NAMED, "max_tokens": 10}, stream) == ("length", [])


async def test_messages_and_responses_keep_their_own_finish_for_a_named_tool(stack):
    client, _ = stack
    body = {"model": "fake-model", "max_tokens": 200, "messages": [{"role": "user", "content": "Weather?"}],
            "tools": [{"name": "get_weather", "input_schema": PARAMS}],
            "tool_choice": {"type": "tool", "name": "get_weather"}}
    message = orjson.loads(await (await client.post("/v1/messages", json=body)).read())
    assert (message["stop_reason"], [b["type"] for b in message["content"]]) == ("tool_use", ["tool_use"])
    body = {"input": "Weather?", "tools": [{"type": "function", "name": "get_weather", "parameters": PARAMS}],
            "tool_choice": {"type": "function", "name": "get_weather"}}
    response = orjson.loads(await (await client.post("/v1/responses", json=body)).read())
    assert (response["status"], [i["type"] for i in response["output"]]) == ("completed", ["function_call"])
