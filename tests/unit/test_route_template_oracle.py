"""Unit tests: the prompt the Anthropic (/v1/messages), Responses (/v1/responses) and Ollama (/api/chat) routes send
the model, against transformers' apply_chat_template on the OpenAI messages each body means, written out by hand from
the API's documents: an Anthropic tool_use block is an assistant tool call whose arguments are its input, a
tool_result block a tool message before the turn's text (its text blocks joined by newlines), a thinking block that turn's reasoning (vLLM's
anthropic/serving.py _convert_anthropic_to_openai_request); a Responses function_call item an assistant tool call, a
function_call_output a tool message, instructions the system message (vLLM's responses/utils.py
construct_input_messages); an Ollama message's tool_name and thinking its tool result's name and reasoning, its
arguments an object (ollama/api/types.go Message)."""
import pytest

from tests.unit.test_chat_template_oracle import NESTED, oracle_ids, served
from tests.unit.test_template_hf_sandbox import tiny_stack  # noqa: F401 - tiny_stack is a fixture

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
OPENAI_TOOLS = [{"type": "function", "function": {"name": "search", "description": "Search", "parameters": NESTED}},
                {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}]
ARGS = {"query": "naïve 日本", "filters": {"tags": ["a"]}, "limit": 2}


def call(cid: str, name: str, arguments: dict) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def user(text) -> dict:
    return {"role": "user", "content": text}


def text_blocks(*texts) -> list:
    return [{"type": "text", "text": text} for text in texts]


ANTHROPIC_TOOLS = [{"name": "search", "description": "Search", "input_schema": NESTED},
                   {"name": "get_weather", "input_schema": WEATHER}]
TOOL_USE = {"role": "assistant", "content": [{"type": "text", "text": "Looking."},
                                             {"type": "tool_use", "id": "tu1", "name": "search", "input": ARGS},
                                             {"type": "tool_use", "id": "tu2", "name": "get_weather",
                                              "input": {"city": "Oslo"}}]}
OPENAI_CALLS = {"role": "assistant", "content": "Looking.",
                "tool_calls": [call("tu1", "search", ARGS), call("tu2", "get_weather", {"city": "Oslo"})]}
# name -> (Anthropic body fields, the OpenAI messages, transformers' keywords)
ANTHROPIC = {
    "system-string": ({"system": "Be brief.", "messages": [user("Hi")]},
                      [{"role": "system", "content": "Be brief."}, user("Hi")], {}),
    "system-blocks": ({"system": text_blocks("Be brief.", " Use French."), "messages": [user("Hi")]},
                      [{"role": "system", "content": "Be brief. Use French."}, user("Hi")], {}),
    "user-blocks": ({"messages": [user(text_blocks("one", "two"))]}, [user(text_blocks("one", "two"))], {}),
    "tool-round": ({"messages": [user("Find"), TOOL_USE, user([
        {"type": "tool_result", "tool_use_id": "tu1", "content": "3 hits"},
        {"type": "tool_result", "tool_use_id": "tu2", "content": text_blocks("cold", " and wet")},
        {"type": "text", "text": "Summarize."}])], "tools": ANTHROPIC_TOOLS},
        [user("Find"), OPENAI_CALLS, {"role": "tool", "tool_call_id": "tu1", "content": "3 hits"},
         {"role": "tool", "tool_call_id": "tu2", "content": "cold\n and wet"}, user("Summarize.")],
        {"tools": OPENAI_TOOLS}),
    "thinking-history": ({"messages": [user("a"), {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "let me see", "signature": "sig"}, {"type": "text", "text": "A"}]},
        user("b")]}, [user("a"), {"role": "assistant", "content": "A", "reasoning_content": "let me see"}, user("b")],
        {}),
    "thinking-tool-loop": ({"messages": [user("Find"), {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "call it", "signature": "s"}, *TOOL_USE["content"][1:2]]},
        user([{"type": "tool_result", "tool_use_id": "tu1", "content": "none"}])], "tools": ANTHROPIC_TOOLS},
        [user("Find"), {"role": "assistant", "content": "", "reasoning_content": "call it",
                        "tool_calls": OPENAI_CALLS["tool_calls"][:1]},
         {"role": "tool", "tool_call_id": "tu1", "content": "none"}], {"tools": OPENAI_TOOLS}),
    "thinking-disabled": ({"messages": [user("Hi")], "thinking": {"type": "disabled"}}, [user("Hi")],
                          {"enable_thinking": False}),
    "prefill": ({"messages": [user("Hi"), {"role": "assistant", "content": "Sure, the"}]},
                [user("Hi"), {"role": "assistant", "content": "Sure, the"}],
                {"continue_final_message": True, "add_generation_prompt": False}),
    "unicode": ({"system": "🏳️‍🌈 é", "messages": [user("中文 <|im_end|> \r\n\tx")]},
                [{"role": "system", "content": "🏳️‍🌈 é"}, user("中文 <|im_end|> \r\n\tx")], {}),
}

RESPONSES_TOOLS = [{"type": "function", "name": "search", "description": "Search", "parameters": NESTED},
                   {"type": "function", "name": "get_weather", "parameters": WEATHER}]
RESPONSES = {
    "string": ({"input": "Hi"}, [user("Hi")], {}),
    "instructions": ({"instructions": "Be brief.", "input": "Hi"},
                     [{"role": "system", "content": "Be brief."}, user("Hi")], {}),
    "message-parts": ({"input": [{"role": "user", "content": [{"type": "input_text", "text": "one "},
                                                             {"type": "input_text", "text": "two"}]}]},
                      [user(text_blocks("one ", "two"))], {}),
    "developer": ({"input": [{"role": "developer", "content": "Dev."}, {"role": "user", "content": "Hi"}]},
                  [{"role": "system", "content": "Dev."}, user("Hi")], {}),
    "history": ({"input": [{"role": "user", "content": "a"},
                           {"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": "A", "annotations": []}]},
                           {"role": "user", "content": "b"}]},
                [user("a"), {"role": "assistant", "content": "A"}, user("b")], {}),
    "function-calls": ({"input": [{"role": "user", "content": "Find"},
                                  {"type": "function_call", "call_id": "fc1", "name": "search",
                                   "arguments": '{"query": "naïve 日本", "filters": {"tags": ["a"]}, "limit": 2}'},
                                  {"type": "function_call", "call_id": "fc2", "name": "get_weather",
                                   "arguments": '{"city": "Oslo"}'},
                                  {"type": "function_call_output", "call_id": "fc1", "output": "3 hits"},
                                  {"type": "function_call_output", "call_id": "fc2", "output": "cold"}],
                        "tools": RESPONSES_TOOLS},
                       [user("Find"), {"role": "assistant", "content": "", "tool_calls": [
                           call("fc1", "search", ARGS), call("fc2", "get_weather", {"city": "Oslo"})]},
                        {"role": "tool", "tool_call_id": "fc1", "content": "3 hits"},
                        {"role": "tool", "tool_call_id": "fc2", "content": "cold"}], {"tools": OPENAI_TOOLS}),
    "reasoning-then-call": ({"input": [{"role": "user", "content": "Find"},
                                       {"type": "reasoning", "id": "rs1", "summary": [],
                                        "content": [{"type": "reasoning_text", "text": "call it"}]},
                                       {"type": "function_call", "call_id": "fc2", "name": "get_weather",
                                        "arguments": '{"city": "Oslo"}'},
                                       {"type": "function_call_output", "call_id": "fc2", "output": "cold"}],
                             "tools": RESPONSES_TOOLS},
                            [user("Find"), {"role": "assistant", "content": "", "reasoning_content": "call it",
                                            "tool_calls": [call("fc2", "get_weather", {"city": "Oslo"})]},
                             {"role": "tool", "tool_call_id": "fc2", "content": "cold"}], {"tools": OPENAI_TOOLS}),
    "thinking-off": ({"input": "Hi", "reasoning": {"effort": "low"}}, [user("Hi")],
                     {"reasoning_effort": "low", "enable_thinking": True}),
}

OLLAMA_TOOLS = OPENAI_TOOLS
OLLAMA = {
    "system": ({"messages": [{"role": "system", "content": "Be brief."}, user("Hi")]},
               [{"role": "system", "content": "Be brief."}, user("Hi")], {}),
    "tool-round": ({"messages": [user("Find"), {"role": "assistant", "content": "", "thinking": "call",
                                               "tool_calls": [{"function": {"name": "search", "arguments": ARGS}}]},
                                 {"role": "tool", "tool_name": "search", "content": "3 hits"}],
                    "tools": OLLAMA_TOOLS},
                   [user("Find"), {"role": "assistant", "content": "", "reasoning_content": "call",
                                   "tool_calls": [call("x", "search", ARGS)]},
                    {"role": "tool", "name": "search", "content": "3 hits"}], {"tools": OPENAI_TOOLS}),
    "think-false": ({"messages": [user("Hi")], "think": False}, [user("Hi")], {"enable_thinking": False}),
    "thinking-history": ({"messages": [user("a"), {"role": "assistant", "content": "A", "thinking": "ra"},
                                       user("b")]},
                         [user("a"), {"role": "assistant", "content": "A", "reasoning_content": "ra"}, user("b")], {}),
    "unicode": ({"messages": [user("👨‍👩‍👧 e\u0301 \r\n\t<|im_start|>")]},
                [user("👨‍👩‍👧 e\u0301 \r\n\t<|im_start|>")], {}),
}


async def check(client, fake, path: str, body: dict, messages: list, kwargs: dict, count_path: str = ""):
    """The prompt ids the route sent equal the oracle's; its token-count route (count_path) counts as many."""
    expected = oracle_ids(messages, {key: kwargs[key] for key in kwargs if key != "enable_thinking"}
                          | ({"chat_template_kwargs": {"enable_thinking": kwargs["enable_thinking"]}}
                             if "enable_thinking" in kwargs else {}))
    assert await served(client, fake, path, body) == expected
    if count_path:
        response = await client.post(count_path, json=body)
        assert (await response.json())["input_tokens"] == len(expected)


@pytest.mark.parametrize("name", ANTHROPIC)
async def test_anthropic_messages(tiny_stack, name):
    client, fake = tiny_stack
    fields, messages, kwargs = ANTHROPIC[name]
    await check(client, fake, "/v1/messages", {"model": "default", "max_tokens": 1, **fields}, messages, kwargs,
                "/v1/messages/count_tokens")


@pytest.mark.parametrize("name", RESPONSES)
async def test_responses(tiny_stack, name):
    client, fake = tiny_stack
    fields, messages, kwargs = RESPONSES[name]
    await check(client, fake, "/v1/responses", {"model": "default", "max_output_tokens": 16, **fields}, messages,
                kwargs, "/v1/responses/input_tokens")


@pytest.mark.parametrize("name", OLLAMA)
async def test_ollama_chat(tiny_stack, name):
    client, fake = tiny_stack
    fields, messages, kwargs = OLLAMA[name]
    await check(client, fake, "/api/chat", {"model": "default", "stream": False, **fields}, messages, kwargs)
