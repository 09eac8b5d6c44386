"""usage.completion_tokens_details.reasoning_tokens on chat answers, as OpenAI, vLLM (#45802) and LM Studio report
how many completion tokens were thinking: whole and streamed alike, summed over choices, counted also when the
reasoning is left out of the answer; legacy completions split nothing and carry no details (fake scheduler)."""
import json

import pytest

REPLY = "Let me think.</think>\n\nHello world"
USER = [{"role": "user", "content": "hi"}]


async def _usage(client, body: dict, stream: bool) -> dict:
    if stream:
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    response = await client.post("/v1/chat/completions", json={"messages": USER, **body})
    assert response.status == 200, await response.text()
    if not stream:
        return (await response.json())["usage"]
    chunks = [json.loads(line[6:]) for line in (await response.text()).splitlines() if line.startswith("data: {")]
    return chunks[-1]["usage"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("extra, choices, thinking", [
    ({}, 1, True), ({"n": 2}, 2, True), ({"include_reasoning": False}, 1, True),
    ({"enable_thinking": False}, 1, False),
], ids=["one", "n=2", "hidden", "thinking off"])
async def test_reasoning_tokens_are_reported(stack, stream, extra, choices, thinking):
    # Before: usage had no completion_tokens_details, so clients counted no thinking (OpenAI's SDK read None).
    client, fake = stack
    if not thinking:
        fake.script.reply = "Hello world"
    usage = await _usage(client, extra, stream)
    expected = choices * len(fake.tokenizer.encode("Let me think.").ids) if thinking else 0
    assert usage["completion_tokens_details"] == {"reasoning_tokens": expected}
    assert usage["completion_tokens"] > expected


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_each_choice_is_counted_apart(stack, stream):
    # Two choices thinking "l" each are 2 reasoning tokens; their texts joined ("ll", one token here) counted 1.
    client, fake = stack
    fake.script.reply, fake.script.delay_s = "l</think>\n\nHello", 0.01
    assert len(fake.tokenizer.encode("ll").ids) == 1
    usage = await _usage(client, {"n": 2}, stream)
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 2}


async def test_continuous_usage_counts_the_thinking_so_far(stack):
    client, fake = stack
    body = {"messages": USER, "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    response = await client.post("/v1/chat/completions", json=body)
    counts = [json.loads(line[6:])["usage"]["completion_tokens_details"]["reasoning_tokens"]
              for line in (await response.text()).splitlines() if line.startswith("data: {")]
    assert counts == sorted(counts) and counts[0] == 0
    assert counts[-1] == len(fake.tokenizer.encode("Let me think.").ids)


async def test_completions_carry_no_details(stack):
    client, _ = stack
    response = await client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 8})
    assert "completion_tokens_details" not in (await response.json())["usage"]


async def test_lmstudio_stream_ends_with_the_whole_answers_usage(stack):
    client, fake = stack
    body = {"messages": USER}
    whole = await (await client.post("/api/v0/chat/completions", json=body)).json()
    response = await client.post("/api/v0/chat/completions",
                                 json={**body, "stream": True, "stream_options": {"include_usage": True}})
    chunks = [json.loads(line[6:]) for line in (await response.text()).splitlines() if line.startswith("data: {")]
    assert chunks[-1]["usage"] == whole["usage"]
    assert whole["usage"]["completion_tokens_details"] == {"reasoning_tokens": len(fake.tokenizer.encode(
        "Let me think.").ids)}


@pytest.mark.parametrize("route", ["chat", "chat stream", "responses", "lmstudio v1"])
async def test_the_generated_ids_are_counted_not_the_text_tokenized_again(stack, route):
    # As vLLM counts them (its parser's count_reasoning_tokens over the output ids, #45802): "l" + "l" generated as
    # two tokens are 2 reasoning tokens, though their text "ll" is one token. Before, the text was tokenized again: 1.
    client, fake = stack
    token = fake.tokenizer.token_to_id
    assert len(fake.tokenizer.encode("ll").ids) == 1
    fake.script.token_ids = [token("l"), token("l"), token("</think>")] + fake.tokenizer.encode("Hello").ids
    if route.startswith("chat"):
        usage = await _usage(client, {}, route == "chat stream")
        assert usage["completion_tokens_details"] == {"reasoning_tokens": 2}
    elif route == "responses":
        response = await client.post("/v1/responses", json={"input": "hi"})
        assert (await response.json())["usage"]["output_tokens_details"] == {"reasoning_tokens": 2}
    else:
        response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "hi"})
        assert (await response.json())["stats"]["reasoning_output_tokens"] == 2
