"""Unit: sampling values from every API through the gateway's float32 wire request to the scheduler's admission
check and the worker's sampler (no sockets): a value an API accepts is admitted and means what it meant."""
import asyncio

import pytest
import torch

from gateway.anthropic_request import parse_messages
from gateway.fake_scheduler import FakeServing, build_tokenizer
from gateway.gen_wire import generate_request
from gateway.model import ModelCard
from gateway.ollama_request import parse_chat as parse_ollama_chat
from gateway.openai import parse_chat
from gateway.responses_request import parse_responses
from scheduler.admission import check_sampling
from worker.sampler import Sampler, SamplingState

USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def card() -> ModelCard:
    info = asyncio.run(FakeServing(build_tokenizer(), max_context_len=2048).Info(None, None))
    return ModelCard.from_info(info)


def wire(plan_gen, card):
    """The scheduler's view of choice 0: admitted (or the admission error raises) and returned."""
    request = generate_request(plan_gen, 0)
    check_sampling(request, card.vocab_size)
    return request.sampling


def openai(card, **fields):
    return parse_chat({"messages": USER, **fields}, card, "tiny").gen


def ollama(card, **options):
    return parse_ollama_chat({"model": "tiny", "messages": USER, "options": options}, card, "tiny").gen


def anthropic(card, **fields):
    return parse_messages({"model": "tiny", "max_tokens": 8, "messages": USER, **fields}, card, "tiny").gen


def responses(card, **fields):
    return parse_responses({"model": "tiny", "input": "hi", **fields}, card, "tiny").chat.gen


@pytest.mark.parametrize("parse, fields, name, want", [
    (openai, {"top_p": 1e-9}, "top_p", 1e-9),
    (openai, {"top_p": 1e-50}, "top_p", 1e-9),
    (openai, {"repetition_penalty": 0.005}, "repetition_penalty", 0.005),
    (openai, {"repetition_penalty": 1e-50}, "repetition_penalty", 1.1754943508222875e-38),
    (ollama, {"top_p": 1e-9}, "top_p", 1e-9),
    (ollama, {"top_p": 1e-50}, "top_p", 1e-9),
    (ollama, {"repeat_penalty": 0.01}, "repetition_penalty", 0.01),
    (ollama, {"top_p": 0}, "top_p", 1e-9),
    (ollama, {"typical_p": 0.7}, "typical_p", 0.7),
    (ollama, {"typical_p": 0}, "typical_p", 1e-9),
    (ollama, {}, "typical_p", 1.0),
    (anthropic, {"top_p": 1e-50}, "top_p", 1e-9),
    (responses, {"top_p": 1e-9}, "top_p", 1e-9),
], ids=["openai-top_p-1e-9", "openai-top_p-1e-50", "openai-repetition-0.005", "openai-repetition-1e-50",
        "ollama-top_p-1e-9", "ollama-top_p-1e-50", "ollama-repeat_penalty-0.01", "ollama-top_p-0 keeps one token (llama.cpp)",
        "ollama-typical_p-0.7",
        "ollama-typical_p-0 keeps one token (llama.cpp)", "ollama-typical_p-unset is off", "anthropic-top_p-1e-50",
        "responses-top_p-1e-9"])
def test_accepted_values_are_admitted_and_stay_positive(card, parse, fields, name, want):
    # Before: 1e-9 and 0.01 arrived as float32 a hair below the scheduler's bounds (a 400 naming the wire field, no
    # param), and 1e-50 arrived as 0, which the sampler reads as "off" (no nucleus filter, no penalty).
    value = getattr(wire(parse(card, **fields), card), name)
    assert value > 0 and value == pytest.approx(want, rel=1e-6)


def test_a_tiny_top_p_samples_the_most_likely_token(card):
    sampling = wire(openai(card, top_p=1e-50, top_k=-1, temperature=2.0, seed=3), card)
    logits = torch.randn(64, card.vocab_size, generator=torch.Generator().manual_seed(0))
    states = [SamplingState(f"r{i}", sampling, [1], [0] * i) for i in range(64)]
    assert Sampler(card.vocab_size).sample(logits, states).token_ids == logits.argmax(dim=-1).tolist()
