"""include_reasoning: false with logprobs (fake scheduler): the logprobs cover only the tokens whose text the client
receives, streamed or not. The chunks of the hidden thinking (and choice.logprobs) carried the logprobs of every
reasoning token, the </think> tag and the newlines after it, so a client saw the thinking's tokens all the same."""
import orjson
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

USER = [{"role": "user", "content": "hi"}]
PATHS = ["/v1/chat/completions", "/api/v0/chat/completions"]


@pytest.fixture
async def fake_stack():
    fake = FakeServing(build_tokenizer(), max_context_len=2048)
    async with fake_gateway(fake) as pair:
        yield pair


async def _logprobs(client, path: str, extra: dict) -> tuple[list, list]:
    """(the non-streamed choice's logprobs.content, the streamed chunks' logprobs.content joined)."""
    body = {"messages": USER, "logprobs": True, "max_tokens": 64, **extra}
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    whole = (await response.json())["choices"][0]["logprobs"]["content"]
    response = await client.post(path, json={**body, "stream": True})
    streamed = []
    for line in (await response.text()).splitlines():
        if line.startswith("data: {"):
            for choice in orjson.loads(line[6:])["choices"]:
                streamed += (choice.get("logprobs") or {}).get("content") or []
    return whole, streamed


def _text(entries: list) -> str:
    return b"".join(bytes(entry["bytes"]) for entry in entries).decode()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("reply, answer", [
    ("Let me think.</think>\n\nHello world", "Hello world"),
    ("Let me think.</think>\n\n🎉 日本", "🎉 日本"),
    ("Still thinking", ""),
    # The split holds back text that may open a tag ("<", "<tool_call>"): those tokens waited and were a 500.
    ("Is 1 < 2? Yes.</think>\n\nHello world", "Hello world"),
    ("A <tool_call> mention</think>\n\nHello world", "Hello world"),
], ids=["answer", "multibyte-first", "never-closed", "less-than", "tag-mention"])
async def test_only_the_answer_tokens_have_logprobs(fake_stack, path, reply, answer):
    client, fake = fake_stack
    fake.script.reply = reply
    for extra in ({"include_reasoning": False}, {"reasoning": {"exclude": True}}):
        whole, streamed = await _logprobs(client, path, extra)
        assert whole == streamed
        assert _text(whole[:-1]) == answer and whole[-1]["token"] == "<|im_end|>", whole
    # Shown, the thinking keeps its tokens' logprobs (the prompt opened <think>, so the reply is all output text).
    whole, streamed = await _logprobs(client, path, {})
    assert whole == streamed and _text(whole[:-1]) == reply


async def test_thinking_off_keeps_every_token(fake_stack):
    client, fake = fake_stack
    fake.script.reply = "Hello world"
    whole, streamed = await _logprobs(client, PATHS[0], {"include_reasoning": False, "reasoning_effort": "none"})
    assert whole == streamed and _text(whole[:-1]) == "Hello world"


@pytest.mark.parametrize("sizes", [[99], [1] * 99, [3, 5, 2, 7, 1, 99]], ids=["one-message", "per-token", "mixed"])
def test_tokens_in_any_grouping(sizes):
    """The scheduler may send several tokens in one message (and a message may hold the end of the thinking and the
    start of the answer): the answer's tokens are the same however the ids are grouped."""
    import asyncio

    from gateway.gen_request import GenRequest
    from gateway.model import ModelCard
    from gateway.pipeline import ChoiceOutput
    from proto import pb
    tokenizer = build_tokenizer()
    card = ModelCard.from_info(asyncio.run(FakeServing(tokenizer).Info(None, None)))
    ids = tokenizer.encode("Let me think.</think>\n\n🎉 Hello world").ids
    req = GenRequest("r", [1], 99, num_logprobs=0, split_reasoning=True, thinking_open=True, hide_reasoning=True)
    out, shown, start = ChoiceOutput(0, req, card), [], 0
    for size in sizes:
        chunk = ids[start:start + size]
        start += size
        finish = "length" if start >= len(ids) else None
        delta = out.push(pb.GenerateResponse(token_ids=chunk, logprobs=[-0.5] * len(chunk)), finish)
        shown += [entry.token_id for entry in delta.logprobs] if delta else []
        if finish:
            break
    assert tokenizer.decode(shown) == "🎉 Hello world"
