"""Names a client makes up (an unknown field, an unknown Ollama option, a Responses tool type, a tool call's name) as
long as a body, on every route that logs them (fake scheduler): the request is answered, and each log line and each
name a OnceLog remembers stays short. Whole, 20 requests with one 5 MB unknown field each grew the gateway by 95 MB
(OnceLog kept every name, up to 1024 of them: 32 GiB at the body limit) and wrote 100 MB of log; an Ollama option
wrote its whole name on every request."""
import logging
import sys

import orjson
import pytest

from gateway.once_log import MAX_NAME_CHARS, OnceLog

LONG = "n" * 2_000_000
HI = [{"role": "user", "content": "hi"}]
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": LONG, "arguments": "[1]"}}]}
CASES = {
    "openai-unknown-field": ("/v1/chat/completions", {"messages": HI, "max_tokens": 2, LONG: 1}),
    "lmstudio-unknown-field": ("/api/v0/chat/completions", {"messages": HI, "max_tokens": 2, LONG: 1}),
    "completions-unknown-field": ("/v1/completions", {"prompt": "hi", "max_tokens": 2, LONG: 1}),
    "anthropic-unknown-field": ("/v1/messages", {"model": "fake-model", "messages": HI, "max_tokens": 2, LONG: 1}),
    "ollama-chat-option": ("/api/chat", {"model": "fake-model", "messages": HI, "stream": False,
                                         "options": {"num_predict": 2, LONG: 1}}),
    "ollama-generate-option": ("/api/generate", {"model": "fake-model", "prompt": "hi", "stream": False,
                                                 "options": {"num_predict": 2, LONG: 1}}),
    "responses-tool-type": ("/v1/responses", {"input": "hi", "max_output_tokens": 2,
                                              "tools": [{"type": LONG, "name": "f"}]}),
    "chat-tool-call-name": ("/v1/chat/completions", {"messages": [*HI, CALL, {
        "role": "tool", "tool_call_id": "c1", "content": "ok"}], "max_tokens": 2}),
}


def once_logs() -> list:
    """Every OnceLog of the gateway's modules."""
    return [value for name, module in list(sys.modules.items()) if name.startswith("gateway.")
            for value in vars(module).values() if isinstance(value, OnceLog)]


@pytest.mark.parametrize("case", list(CASES))
async def test_a_long_made_up_name_is_served_and_logged_short(stack, caplog, monkeypatch, case):
    client, fake = stack
    fake.script.reply = "ok"
    path, body = CASES[case]
    for log in once_logs():
        monkeypatch.setattr(log, "seen", set())
    with caplog.at_level(logging.WARNING, logger="sparkinfer.gateway"):
        response = await client.post(path, data=orjson.dumps(body), headers={"Content-Type": "application/json"})
        raw = await response.read()
    # A name the prompt holds (a tool call's) leaves no room in the fake model's 2048-token context.
    in_prompt = case == "chat-tool-call-name"
    assert (response.status, in_prompt) in ((200, False), (400, True)), raw[:300]
    if in_prompt:
        assert orjson.loads(raw)["error"]["code"] == "context_length_exceeded"
    named = [record.getMessage() for record in caplog.records if "nnnnnnnn" in record.getMessage()]
    assert named, "the name is logged"
    assert max(map(len, named)) < 400, [line[:200] for line in named]
    assert "...nnnn" in named[0]
    remembered = [name for log in once_logs() for name in log.seen]
    assert all(len(name) <= MAX_NAME_CHARS for name in remembered), [len(name) for name in remembered]
