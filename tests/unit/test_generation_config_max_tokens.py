"""Unit tests (fake scheduler): generation_config.json's max_new_tokens is the output limit of a chat request that
sends none, as vLLM (--generation-config auto, its default) takes it: ModelConfig.get_diff_sampling_param maps
max_new_tokens to max_tokens, and get_max_tokens (vllm/entrypoints/utils.py) returns min(max_model_len - prompt,
request max_tokens if sent else that default). A limit the request sends wins; /v1/completions keeps OpenAI's 16."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

MAX_NEW_TOKENS = 3
REPLY = "one two three four five six seven eight nine ten eleven twelve"
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def stack():
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    fake.script.reply = REPLY
    fake.generation_config = f'{{"temperature": 0.7, "max_new_tokens": {MAX_NEW_TOKENS}}}'
    async with fake_gateway(fake) as pair:
        yield pair


def _vllm_limit(max_model_len: int, num_prompt: int, requested) -> int:
    """vLLM's get_max_tokens with default_sampling_params {"max_tokens": MAX_NEW_TOKENS} and no override."""
    return min(max_model_len - num_prompt, requested if requested is not None else MAX_NEW_TOKENS)


@pytest.mark.parametrize("requested", [None, 5, 1], ids=["absent", "more-than-default", "less-than-default"])
async def test_chat_without_a_limit_takes_max_new_tokens(stack, requested):
    client, fake = stack
    body = {"model": "fake-model", "messages": USER, "enable_thinking": False}
    if requested is not None:
        body["max_tokens"] = requested
    reply = await (await client.post("/v1/chat/completions", json=body)).json()
    want = _vllm_limit(2048, reply["usage"]["prompt_tokens"], requested)
    assert reply["usage"]["completion_tokens"] == want == fake.script.requests[-1].max_tokens
    assert reply["choices"][0]["finish_reason"] == "length"


async def test_responses_without_max_output_tokens_takes_max_new_tokens(stack):
    client, fake = stack
    reply = await (await client.post("/v1/responses", json={"model": "fake-model", "input": "hi",
                                                              "reasoning": {"effort": "none"}})).json()
    assert reply["usage"]["output_tokens"] == MAX_NEW_TOKENS == fake.script.requests[-1].max_tokens
    assert reply["status"] == "incomplete" and reply["incomplete_details"] == {"reason": "max_output_tokens"}


async def test_completions_keep_openais_default_of_16(stack):
    """vLLM's CompletionRequest sends max_tokens 16 when absent, which get_max_tokens takes over the default."""
    client, fake = stack
    reply = await (await client.post("/v1/completions", json={"model": "fake-model", "prompt": "hi"})).json()
    assert len(fake.tokenizer.encode(REPLY).ids) > 16
    assert reply["usage"]["completion_tokens"] == 16 == fake.script.requests[-1].max_tokens


async def test_llama_cpp_n_predict_minus_one_is_no_limit_whatever_the_default(stack):
    """n_predict -1 is llama.cpp's explicit "no limit" (README: up to the context); the server-wide max_new_tokens of
    an absent limit capped it at 3 tokens."""
    client, fake = stack
    body = {"model": "fake-model", "messages": USER, "enable_thinking": False, "n_predict": -1}
    reply = await (await client.post("/v1/chat/completions", json=body)).json()
    assert fake.script.requests[-1].max_tokens == 2048 - reply["usage"]["prompt_tokens"]
    assert reply["usage"]["completion_tokens"] > MAX_NEW_TOKENS and reply["choices"][0]["finish_reason"] == "stop"
