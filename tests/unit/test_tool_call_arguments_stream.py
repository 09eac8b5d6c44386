"""Unit tests: a tool call's arguments stream as the model writes them (vllm#30439, lmstudio#1868, sglang#27005:
coding agents showed nothing while a long file was written as a call's argument), and the pieces of each call join
to exactly the arguments the whole output reads, over many scripted outputs cut into pieces of every size."""
import json

import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.tool_stream import CallDelta, ToolCallStream
from gateway.tool_filter import ToolCallFilter

SCHEMA = {"type": "object", "properties": {
    "path": {"type": "string"}, "content": {"type": "string", "description": "the file's text"},
    "mode": {"type": "integer"}, "ratio": {"type": "number"}, "force": {"type": "boolean"},
    "meta": {"type": "object"}, "tags": {"type": "array", "items": {"type": "string"}},
    "note": {"type": ["string", "null"]}, "kind": {"type": "string", "enum": ["a", "b"]},
    "limit": {"type": "integer"}, "memo": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}},
    "required": ["path"]}
TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": SCHEMA}},
         {"type": "function", "function": {"name": "get_weather", "parameters": {
             "type": "object", "properties": {"city": {"type": "string"}}}}}]


def param(name: str, value: str) -> str:
    return f"<parameter={name}>\n{value}\n</parameter>\n"


def call(name: str, *params: str) -> str:
    return f"<tool_call>\n<function={name}>\n" + "".join(params) + "</function>\n</tool_call>"


FILE = 'def f(x):\n    return "a\\tb" + \'</p>\'\n\n<div>\n  <p>hi</p>\n</div>\n\u00e9\U0001F600 \\ "q"\n'
WRITE = call("write_file", param("path", "/tmp/a.py"), param("content", FILE))
WEATHER = call("get_weather", param("city", "Paris"))
OUTPUTS = {
    "typed": call("write_file", param("path", "p"), param("mode", "644"), param("ratio", "0.5"),
                  param("force", "True"), param("meta", "{'k': [1, None]}"), param("tags", '["x", "y"]'),
                  param("kind", "b"), param("content", "x")),
    "null-and-empty": call("write_file", param("path", "p"), param("note", "None"), param("limit", ""),
                           param("content", "")),
    "nullable-strings": call("write_file", param("path", "p"), param("note", "nullish\n  over lines"),
                             param("memo", '"quoted"'), param("content", "x")),
    "nullable-nulls": call("write_file", param("memo", " NULL "), param("note", "none"), param("path", "p")),
    "undeclared": call("write_file", param("path", "p"), param("cwd", "/tmp\n  spaced ")),
    "missing-close": ("<tool_call>\n<function=write_file>\n<parameter=path>\n/a\n<parameter=content>\nbody\n"
                      "</parameter>\n</function>\n</tool_call>"),
    "missing-last-close": "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</function>\n</tool_call>",
    "several": WRITE + "\n" + WEATHER + "\n" + call("get_weather", param("city", "Oslo")),
    "text-before": "I will write it.\n\n" + WRITE,
    "mention-first": "The <tool_call> tag opens a call; here is one:\n" + WEATHER,
    "text-after": WEATHER + "\nDone, that was the call.",
    "markup-in-value": call("write_file", param("path", "p"), param("content", "a </parameter> b\n"
                            "<parameter=x>\ny\n</parameter>\nend </tool_call> too")),
    "call-in-value": call("write_file", param("content", WEATHER), param("path", "p")),
    "long": call("write_file", param("path", "p"), param("content", "line of text\n" * 60)),
    "no-parameters": "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>",
    "unclosed-at-stop": "<tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n</parameter>\n",
    "json-form": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Kyiv"}}\n</tool_call>',
    "unknown-tool": call("nope", param("a", "1")),
}
SIZES = [1, 2, 3, 5, 7, 13, 10_000]


def whole(text: str, reason: str = "stop") -> tuple[str, list]:
    """The non-streamed answer's (content, [(name, arguments)]): the whole output read at once."""
    flt = ToolCallFilter(TOOLS)
    content = flt.push(text)
    tail, calls = flt.finish(reason)
    return content + tail, [(c["function"]["name"], c["function"]["arguments"]) for c in calls or []]


def streamed(text: str, size: int, reason: str = "stop") -> tuple[str, list, list]:
    """(content, [(name, joined arguments)], [(how much text was pushed, delta)]) of the output pushed in pieces."""
    stream, content, log = ToolCallStream(TOOLS), "", []
    for start in range(0, len(text), size):
        piece, deltas = stream.push(text[start:start + size])
        content += piece
        log += [(start + size, delta) for delta in deltas]
    tail, deltas, _ = stream.finish(reason)
    log += [(len(text) + 1, delta) for delta in deltas]
    calls: dict = {}
    for _, delta in log:
        name, arguments = calls.get(delta.index, (None, ""))
        calls[delta.index] = (delta.name or name, arguments + delta.arguments)
    return content + tail, [calls[index] for index in sorted(calls)], log


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("text", OUTPUTS.values(), ids=OUTPUTS.keys())
def test_the_pieces_join_to_the_whole_reading(text, size):
    content, calls, log = streamed(text, size)
    assert (content, calls) == whole(text)
    for index in {delta.index for _, delta in log}:
        mine = [delta for _, delta in log if delta.index == index]
        assert mine[0].id is not None and all(delta.id is None for delta in mine[1:])
        assert [delta.done for delta in mine] == [False] * (len(mine) - 1) + [True]


@pytest.mark.parametrize("size", [1, 4])
def test_arguments_stream_before_the_call_ends(size):
    text = "Writing.\n" + WRITE
    _, calls, log = streamed(text, size)
    end = text.index("</tool_call>")
    pieces = [(at, delta) for at, delta in log if delta.arguments]
    assert len(pieces) > 10 and pieces[0][0] <= text.index("<parameter=content>")
    # The file's text goes out as it is written: most of it before its </parameter>.
    before = "".join(delta.arguments for at, delta in pieces if at <= text.index(FILE) + len(FILE) - 2)
    assert before.startswith('{"path":"/tmp/a.py","content":"def f(x):') and len(before) > len(FILE)
    assert all(at <= end for at, delta in pieces[:-1])
    assert json.loads(calls[0][1]) == {"path": "/tmp/a.py", "content": FILE}


def test_a_value_that_may_end_waits_for_what_follows():
    """Text that might still end the value (a </parameter>, a line opening a parameter) is held until it shows."""
    stream = ToolCallStream(TOOLS)
    prefix = "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan"
    assert "".join(d.arguments for d in stream.push(prefix)[1]) == '{"city":"San'
    assert stream.push(" Jose </param")[1][0].arguments == " Jose "
    assert stream.push("eter>")[1] == []
    assert stream.push(" x\n")[1][0].arguments == "</parameter> x"
    assert stream.push("<parameter=")[1] == []
    assert stream.push("zip>")[1] == []
    # The first </parameter> counts as closing the <parameter=zip> line (tool_markup's balance), so this one ends it,
    # once the output's end shows that no other text follows the call.
    assert stream.push("\n</parameter>\n</function>\n</tool_call>")[1] == []
    assert stream.finish("stop") == ("", [CallDelta(0, '\\n<parameter=zip>"}', done=True,
                                                    whole='{"city":"San Jose </parameter> x\\n<parameter=zip>"}')], False)


@pytest.mark.parametrize("name", ["note", "memo"], ids=["type-list", "any-of"])
def test_a_nullable_strings_text_streams_once_it_cannot_be_null(name):
    """A nullable string (["string", "null"], pydantic's Optional[str]) was held until its </parameter>: its text
    goes out as it comes once it can no longer read as null (None, null) or as a JSON string."""
    stream = ToolCallStream(TOOLS)
    prefix = f"<tool_call>\n<function=write_file>\n<parameter=path>\np\n</parameter>\n<parameter={name}>\nNo"
    assert "".join(d.arguments for d in stream.push(prefix)[1]) == '{"path":"p"'
    assert stream.push("ne")[1] == []
    assert stream.push("theless, a")[1][0].arguments == f',"{name}":"Nonetheless, a'
    assert stream.push(" note")[1][0].arguments == " note"
    assert stream.push("\n</parameter>\n</function>\n</tool_call>")[1] == []
    assert stream.finish("stop")[1][0].arguments == '"}'


def test_a_call_cut_by_max_tokens_stays_as_sent():
    text = call("write_file", param("path", "p"), param("content", "abc def"))[:-38]
    content, calls, log = streamed(text, 3, reason="length")
    assert content == "" and calls == [("write_file", '{"path":"p","content":"abc def')]
    assert not any(delta.done for _, delta in log)


def test_a_parameter_given_twice_reads_as_its_last_value():
    text = call("get_weather", param("city", "Paris"), param("city", "Rome"))
    _, calls, _ = streamed(text, 2)
    assert json.loads(calls[0][1]) == json.loads(whole(text)[1][0][1]) == {"city": "Rome"}


TOKENIZER = build_tokenizer()
REPLY = "Writing.\n\n" + WRITE
# Generation cut just before the content's </parameter>: the model has not written </tool_call> yet.
BEFORE_END = len(TOKENIZER.encode(REPLY[:REPLY.index(FILE) + len(FILE) - 8]).ids)
USER = [{"role": "user", "content": "write it"}]
WHOLE_ARGUMENTS = json.dumps({"path": "/tmp/a.py", "content": FILE}, ensure_ascii=False, separators=(",", ":"))
ROUTES = {
    "chat": ("/v1/chat/completions", {"messages": USER, "tools": TOOLS, "enable_thinking": False}),
    "lmstudio": ("/api/v0/chat/completions", {"messages": USER, "tools": TOOLS, "enable_thinking": False}),
    "responses": ("/v1/responses", {"input": "write it", "reasoning": {"effort": "none"},
                                    "tools": [{"type": "function", **tool["function"]} for tool in TOOLS]}),
    "anthropic": ("/v1/messages", {"model": "fake-model", "messages": USER, "max_tokens": 2000, "thinking": {"type": "disabled"},
                                   "tools": [{"name": tool["function"]["name"], "input_schema": tool["function"][
                                       "parameters"]} for tool in TOOLS]}),
}


@pytest.fixture
async def stack():
    fake = FakeServing(TOKENIZER, max_context_len=8192)
    fake.script.reply = REPLY
    async with fake_gateway(fake) as pair:
        yield pair


def _pieces(route: str, raw: bytes) -> list:
    """The first call's arguments pieces, in the route's own events."""
    datas = [orjson.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]
    if route == "responses":
        return [d["delta"] for d in datas if d["type"] == "response.function_call_arguments.delta"]
    if route == "anthropic":
        return [d["delta"]["partial_json"] for d in datas if d["type"] == "content_block_delta"
                and d["delta"]["type"] == "input_json_delta"]
    return [call["function"]["arguments"] for d in datas for choice in d["choices"]
            for call in choice["delta"].get("tool_calls") or [] if call["function"]["arguments"]]


def _limit(route: str, body: dict, limit: int) -> dict:
    key = {"responses": "max_output_tokens", "anthropic": "max_tokens"}.get(route, "max_tokens")
    return {**body, key: limit, "stream": True}


@pytest.mark.parametrize("route", list(ROUTES))
async def test_every_route_streams_the_arguments_as_they_come(stack, route):
    client, _ = stack
    path, body = ROUTES[route]
    pieces = _pieces(route, await (await client.post(path, json={**body, "stream": True})).read())
    assert len(pieces) > 10 and "".join(pieces) == WHOLE_ARGUMENTS
    whole = await (await client.post(path, json=body)).json()
    if route == "responses":
        assert [item["arguments"] for item in whole["output"] if item["type"] == "function_call"] == [WHOLE_ARGUMENTS]
    elif route == "anthropic":
        assert [block["input"] for block in whole["content"] if block["type"] == "tool_use"] == [
            json.loads(WHOLE_ARGUMENTS)]
    else:
        assert [c["function"]["arguments"] for c in whole["choices"][0]["message"]["tool_calls"]] == [WHOLE_ARGUMENTS]


@pytest.mark.parametrize("route", list(ROUTES))
async def test_the_arguments_go_out_before_the_call_ends(stack, route):
    """The output stops before the model wrote the content's </parameter> and </tool_call>: all that was written of
    the file has gone out already (before: nothing of a call went out until its </tool_call>)."""
    client, _ = stack
    path, body = ROUTES[route]
    pieces = _pieces(route, await (await client.post(path, json=_limit(route, body, BEFORE_END))).read())
    sent = "".join(pieces)
    assert len(pieces) > 10 and sent.startswith('{"path":"/tmp/a.py","content":"def f(x):')
    assert WHOLE_ARGUMENTS.startswith(sent) and len(sent) > len(WHOLE_ARGUMENTS) - 30
