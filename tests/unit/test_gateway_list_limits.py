"""Gateway: list sizes refused before schema validation (a 3M-id prompt took 98 s to refuse), fake scheduler. Each
test proves the order, not a time: the schema validator (or the prompt renderer) fails the test if it is reached."""
import orjson
import pytest
from jsonschema import Draft202012Validator

from gateway import ollama_request
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

CONTEXT = 2048


@pytest.fixture
async def stack():
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=CONTEXT)) as pair:
        yield pair


HUGE = 2_000_000
CASES = [
    ("/v1/completions", {"prompt": [5] * HUGE}, 400, "context_length_exceeded", "prompt"),
    ("/v1/completions", {"prompt": [[5] * HUGE]}, 400, "context_length_exceeded", "prompt"),
    ("/v1/completions", {"prompt": ["a"] * HUGE}, 400, "invalid_value", "prompt"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}] * 200_000}, 400,
     "context_length_exceeded", "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "stop": ["x"] * HUGE}, 400,
     "invalid_value", "stop"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}],
                              "tools": [{"type": "function", "function": {"name": "f"}}] * 100_000}, 400,
     "context_length_exceeded", "tools"),
    ("/api/v0/completions", {"prompt": [5] * HUGE}, 400, "context_length_exceeded", "prompt"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}],
                              "logit_bias": {str(i): 1 for i in range(300_000)}}, 400, "invalid_value", "logit_bias"),
    # llama.cpp's list form: [token id or text, bias] pairs; one item per pair is as long to validate as the object.
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "a"}], "logit_bias": [[5, 1.0]] * 300_000},
     400, "invalid_value", "logit_bias"),
    ("/v1/completions", {"prompt": "a", "logit_bias": [["hello", False]] * 300_000}, 400, "invalid_value",
     "logit_bias"),
    ("/api/v0/chat/completions", {"messages": [{"role": "user", "content": "a"}], "logit_bias": [[5, 1]] * 300_000},
     400, "invalid_value", "logit_bias"),
    ("/v1/responses", {"input": "a", "logit_bias": [[5, 1.0]] * 300_000}, 400, "invalid_value", "logit_bias"),
]


@pytest.mark.parametrize("path, body, status, code, param", CASES, ids=[f"{c[0]}-{c[4]}-{i}" for i, c in
                                                                       enumerate(CASES)])
async def test_oversized_lists_are_refused_at_once(stack, monkeypatch, path, body, status, code, param):
    client, fake = stack
    monkeypatch.setattr(Draft202012Validator, "iter_errors", _never("the schema validator"))
    response = await client.post(path, data=orjson.dumps(body))
    error = orjson.loads(await response.read())["error"]
    assert (response.status, error["code"], error["param"]) == (status, code, param)
    assert fake.script.requests == []


def _never(what: str):
    def reached(*args, **kwargs):
        raise AssertionError(f"{what} was reached: the list was not refused before it")
    return reached


async def test_ollama_refuses_more_messages_than_the_window_before_rendering(stack, monkeypatch):
    client, _ = stack
    monkeypatch.setattr(ollama_request, "_render", _never("the prompt renderer"))
    body = {"model": "default", "stream": False, "options": {"num_ctx": 512},
            "messages": [{"role": "user", "content": "a"}] * 100_000}
    response = await client.post("/api/chat", data=orjson.dumps(body))
    assert response.status == 400 and "context window of 512 tokens" in orjson.loads(await response.read())["error"]


TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize("num_ctx, num_tools", [(None, 100_000), (512, 600)], ids=["model-context", "num_ctx"])
async def test_ollama_refuses_more_tools_than_the_window_before_checking_them(stack, monkeypatch, num_ctx, num_tools):
    """Ollama renders every tool into the prompt (truncation drops messages, never tools): 100 000 tools took 36 s
    of type checks (jsonschema over each) and rendering to get the same 400."""
    client, _ = stack
    monkeypatch.setattr(Draft202012Validator, "iter_errors", _never("the schema validator") if num_ctx is None
                        else Draft202012Validator.iter_errors)
    monkeypatch.setattr(ollama_request, "_render", _never("the prompt renderer"))
    monkeypatch.setattr(ollama_request, "read_tools", _never("the tool reader"))
    body = {"model": "default", "stream": False, "messages": [{"role": "user", "content": "a"}],
            "tools": [TOOL] * num_tools, **({"options": {"num_ctx": num_ctx}} if num_ctx else {})}
    response = await client.post("/api/chat", data=orjson.dumps(body))
    ctx = num_ctx or CONTEXT
    assert (response.status, orjson.loads(await response.read())) == (400, {"error": (
        f"the input length exceeds the context length: the prompt is at least {num_tools} tokens ({num_tools} tools), which "
        f"exceeds the context window of {ctx} tokens; it was not truncated. Shorten the prompt or raise options.num_ctx")})


async def test_truncate_prompt_tokens_still_takes_a_long_prompt(stack):
    client, fake = stack
    response = await client.post("/v1/completions", data=orjson.dumps(
        {"prompt": [5] * (CONTEXT + 100), "truncate_prompt_tokens": 10, "max_tokens": 2}))
    assert response.status == 200 and len(fake.script.requests[-1].prompt_token_ids) == 10


async def test_llama_cpp_completion_refuses_more_bias_pairs_than_the_vocabulary_before_validation(stack, monkeypatch):
    client, fake = stack
    monkeypatch.setattr(Draft202012Validator, "iter_errors", _never("the schema validator"))
    response = await client.post("/completion", data=orjson.dumps({"prompt": "a", "logit_bias": [[5, 1]] * 300_000}))
    error = orjson.loads(await response.read())["error"]
    assert response.status == 400 and error["code"] == 400 and error["type"] == "invalid_request_error"
    assert error["message"].startswith("'logit_bias' holds 300000 entries but the vocabulary has only ")
    assert fake.script.requests == []
