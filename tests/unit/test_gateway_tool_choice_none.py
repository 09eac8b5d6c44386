"""tool_choice "none" as vLLM (>= 0.10) serves it: the tools stay in the prompt, and a <tool_call> the model writes
anyway is plain content, never tool_calls; vLLM's --exclude-tools-when-tool-choice-none drops them (fake
scheduler)."""
import orjson
import pytest

from gateway.config import parse_config
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TOKENIZER = build_tokenizer()
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
CALL = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
BODY = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS, "enable_thinking": False}
ROUTES = ["/v1/chat/completions", "/api/v0/chat/completions"]


async def _stack(**config):
    fake = FakeServing(TOKENIZER, max_context_len=2048)
    fake.script.reply = CALL
    return fake_gateway(fake, **config)


@pytest.fixture
async def stack():
    async with await _stack() as pair:
        yield pair


async def _post(client, path: str, body: dict) -> tuple[int, bytes]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, await response.read()


def _prompt(fake) -> str:
    return TOKENIZER.decode(fake.script.requests[-1].prompt_token_ids)


@pytest.mark.parametrize("path", ROUTES)
async def test_none_keeps_the_tools_in_the_prompt_and_answers_a_call_as_text(stack, path):
    client, fake = stack
    status, raw = await _post(client, path, {**BODY, "tool_choice": "auto"})
    auto_prompt = _prompt(fake)
    assert status == 200 and orjson.loads(raw)["choices"][0]["finish_reason"] == "tool_calls"
    status, raw = await _post(client, path, {**BODY, "tool_choice": "none"})
    choice = orjson.loads(raw)["choices"][0]
    assert status == 200 and _prompt(fake) == auto_prompt and '"name": "get_weather"' in auto_prompt
    assert choice["message"]["content"] == CALL and "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"


@pytest.mark.parametrize("path", ROUTES)
async def test_none_streamed_sends_the_call_as_content_deltas(stack, path):
    client, _ = stack
    status, raw = await _post(client, path, {**BODY, "tool_choice": "none", "stream": True})
    chunks = [orjson.loads(line[6:]) for line in raw.decode().split("\n\n") if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert status == 200 and "".join(d.get("content") or "" for d in deltas) == CALL
    assert not any("tool_calls" in d for d in deltas)
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"


async def test_the_legacy_function_call_none_is_the_same(stack):
    client, fake = stack
    functions = [t["function"] for t in TOOLS]
    body = {"messages": BODY["messages"], "functions": functions, "function_call": "none", "enable_thinking": False}
    status, raw = await _post(client, "/v1/chat/completions", body)
    message = orjson.loads(raw)["choices"][0]["message"]
    assert status == 200 and message["content"] == CALL and "tool_calls" not in message
    assert "get_weather" in _prompt(fake)


@pytest.mark.parametrize("path", ROUTES)
async def test_exclude_tools_when_tool_choice_none_drops_them_from_the_prompt(path):
    async with await _stack(exclude_tools_when_tool_choice_none=True) as (client, fake):
        await _post(client, path, {**BODY, "tools": None})
        bare = _prompt(fake)
        status, raw = await _post(client, path, {**BODY, "tool_choice": "none"})
        assert status == 200 and _prompt(fake) == bare and "get_weather" not in bare
        assert orjson.loads(raw)["choices"][0]["message"]["content"] == CALL
        await _post(client, path, {**BODY, "tool_choice": "auto"})
        assert "get_weather" in _prompt(fake)


@pytest.mark.parametrize("argv, env, expected", [
    ([], {}, False), (["--exclude-tools-when-tool-choice-none"], {}, True),
    ([], {"SPARKINFER_EXCLUDE_TOOLS_WHEN_TOOL_CHOICE_NONE": "1"}, True),
    ([], {"SPARKINFER_EXCLUDE_TOOLS_WHEN_TOOL_CHOICE_NONE": "0"}, False),
], ids=["default", "flag", "env-1", "env-0"])
def test_the_exclude_flag_and_variable(monkeypatch, argv, env, expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert parse_config(argv).exclude_tools_when_tool_choice_none is expected


async def test_exclude_tools_reaches_every_route_that_renders_the_chat_prompt():
    """/apply-template (llama.cpp's), /tokenize and /v1/score render "the text the chat route renders for the same
    fields" (README): with the flag on, tool_choice "none" drops the tools there too. Before, /apply-template and
    /v1/score rendered them (1090 characters against the chat's 11 tokens on the tiny model)."""
    async with await _stack(exclude_tools_when_tool_choice_none=True) as (client, fake):
        body = {**BODY, "tool_choice": "none"}
        await _post(client, "/v1/chat/completions", body)
        chat_ids = fake.script.requests[-1].prompt_token_ids
        status, raw = await _post(client, "/apply-template", body)
        assert status == 200 and orjson.loads(raw)["prompt"] == TOKENIZER.decode(chat_ids, skip_special_tokens=False)
        status, raw = await _post(client, "/tokenize", {**body, "add_special": False})
        assert status == 200 and orjson.loads(raw)["tokens"] == chat_ids
        status, raw = await _post(client, "/v1/score", {**body, "completion": "yes"})
        assert status == 200 and orjson.loads(raw)["usage"]["prompt_tokens"] == len(chat_ids)
        assert "get_weather" not in _prompt(fake)


ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Weather of a city",
                    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather of a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]


@pytest.mark.parametrize("path, body", [
    ("/v1/messages", {"model": "default", "max_tokens": 8, "messages": BODY["messages"], "tools": ANTHROPIC_TOOLS,
                      "tool_choice": {"type": "none"}}),
    ("/v1/responses", {"model": "default", "input": "Weather in Paris?", "tools": RESPONSES_TOOLS, "tool_choice": "none",
                       "store": False}),
], ids=["anthropic", "responses"])
async def test_the_flag_reaches_the_anthropic_and_responses_routes(path, body):
    """The server's flag rides on the model card the engine sets (as force_include_usage), so the routes that
    translate into a chat body honour it without passing it along: tool_choice none drops the tools there too,
    and with the flag off they stay in the prompt."""
    for flag in (True, False):
        async with await _stack(exclude_tools_when_tool_choice_none=flag) as (client, fake):
            status, raw = await _post(client, path, body)
            assert status == 200, raw
            assert ("get_weather" in _prompt(fake)) is not flag


async def test_the_engine_sets_the_flag_on_the_card():
    async with await _stack(exclude_tools_when_tool_choice_none=True) as (client, fake):
        await _post(client, "/v1/chat/completions", BODY)
        engine = next(value for value in client.app._state.values() if type(value).__name__ == "Engine")
        assert (await engine.card()).exclude_tools_when_none is True
