"""/v1 logprob counts out of range: vLLM's 400s in its words (its protocols' check_logprobs, its engine's
_validate_logprobs at --max-logprobs 20), -1 counted as the whole vocabulary (no sockets)."""
import asyncio

import pytest

from gateway.errors import ApiError
from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.model import ModelCard
from gateway.openai import parse_chat
from gateway.openai_completion import parse_completion

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def card():
    info = asyncio.run(FakeServing(build_tokenizer(), max_context_len=128).Info(None, None))
    return ModelCard.from_info(info)


def _error(parse, card, body):
    with pytest.raises(ApiError) as info:
        parse(body, card, "fake-model")
    return info.value.status, info.value.param, info.value.message


def _too_many(kind, count):
    return f"Requested {kind} logprobs of {count}, which is greater than max allowed: 20"


CHAT = [
    ("top-21", {"logprobs": True, "top_logprobs": 21}, "top_logprobs", _too_many("sample", 21)),
    ("top-whole-vocab", {"logprobs": True, "top_logprobs": -1}, "top_logprobs", "VOCAB sample"),
    ("top-minus-2", {"logprobs": True, "top_logprobs": -2}, "top_logprobs",
     "`top_logprobs` must be a positive value or -1."),
    ("top-without-logprobs", {"top_logprobs": 2}, "top_logprobs",
     "when using `top_logprobs`, `logprobs` must be set to true."),
    ("top-as-text", {"logprobs": True, "top_logprobs": "21"}, "top_logprobs", _too_many("sample", 21)),
    ("prompt-21", {"prompt_logprobs": 21}, "prompt_logprobs", _too_many("prompt", 21)),
    ("prompt-whole-vocab", {"prompt_logprobs": -1}, "prompt_logprobs", "VOCAB prompt"),
    ("prompt-stream", {"prompt_logprobs": 1, "stream": True}, "prompt_logprobs",
     "`prompt_logprobs` are not available when `stream=True`."),
]
COMPLETION = [
    ("logprobs-21", {"logprobs": 21}, "logprobs", _too_many("sample", 21)),
    ("echo-logprobs-21", {"logprobs": 21, "echo": True, "max_tokens": 0}, "logprobs", _too_many("sample", 21)),
    ("logprobs-minus-1", {"logprobs": -1}, "logprobs", "`logprobs` must be a positive value."),
    ("prompt-whole-vocab", {"prompt_logprobs": -1}, "prompt_logprobs", "VOCAB prompt"),
    ("prompt-minus-2", {"prompt_logprobs": -2}, "prompt_logprobs",
     "`prompt_logprobs` must be a positive value or -1."),
]


def _expected(card, message):
    if message.startswith("VOCAB "):
        return _too_many(message.split()[1], card.vocab_size)
    return message


@pytest.mark.parametrize("body,param,message", [c[1:] for c in CHAT], ids=[c[0] for c in CHAT])
def test_chat_logprob_counts(card, body, param, message):
    assert _error(parse_chat, card, {"messages": USER, **body}) == (400, param, _expected(card, message))


@pytest.mark.parametrize("body,param,message", [c[1:] for c in COMPLETION], ids=[c[0] for c in COMPLETION])
def test_completion_logprob_counts(card, body, param, message):
    assert _error(parse_completion, card, {"prompt": "hi", **body}) == (400, param, _expected(card, message))


@pytest.mark.parametrize("chat,body", [
    (True, {"logprobs": True, "top_logprobs": 20, "prompt_logprobs": 20}),
    (True, {"logprobs": False, "top_logprobs": 0}),
    (False, {"logprobs": 20, "prompt_logprobs": 0}),
], ids=["chat-20", "chat-top-0-without-logprobs", "completion-20"])
def test_counts_in_range_are_served(card, chat, body):
    plan = (parse_chat(dict(body, messages=USER), card, "fake-model") if chat
            else parse_completion(dict(body, prompt="hi"), card, "fake-model"))
    assert plan.gen.num_logprobs == (body["top_logprobs"] if chat and body["logprobs"] else
                                     None if chat else body["logprobs"])
    assert plan.gen.num_prompt_logprobs == body.get("prompt_logprobs")


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completions"])
def test_prompt_logprobs_0_streams_without_them(card, chat):
    """vLLM refuses prompt_logprobs on a stream only above 0 (or -1): 0 streams, with no prompt logprobs."""
    body = {"prompt_logprobs": 0, "stream": True, **({"messages": USER} if chat else {"prompt": "hi"})}
    plan = (parse_chat if chat else parse_completion)(body, card, "fake-model")
    assert plan.stream and plan.gen.num_prompt_logprobs is None and plan.prompt.vllm_top is None
