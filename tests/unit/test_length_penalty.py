"""length_penalty is taken and changes nothing: vLLM reads it only for beam search (to_beam_search_params), which is
refused here by use_beam_search, and its sampling parameters have none, so a body without beam search is answered
as if it were absent. SillyTavern's text-completion client sends its slider's value with every request (public/
scripts/textgen-settings.js getTextGenGenerationData: 'length_penalty': settings.length_penalty); one other than 1
was our 400 'length_penalty only applies to beam search' (fake scheduler)."""
import pytest

from tests.unit.test_gateway_fields import BASE, post


def _text(answer: dict) -> str:
    choice = answer["choices"][0]
    return choice["text"] if "text" in choice else choice["message"]["content"]


@pytest.mark.parametrize("path, body", [
    ("/v1/chat/completions", BASE),
    ("/v1/completions", {"model": "default", "prompt": "hi", "max_tokens": 4}),
], ids=["chat", "completions"])
async def test_a_length_penalty_without_beam_search_is_served_as_without_it(stack, path, body):
    client, fake = stack
    status, plain = await post(client, body, path)
    assert status == 200, plain
    sampling = fake.script.requests[-1].sampling
    status, got = await post(client, {**body, "length_penalty": 1.3, "early_stopping": False}, path)
    assert status == 200, got
    assert fake.script.requests[-1].sampling == sampling
    assert _text(got) == _text(plain) != ""


async def test_beam_search_itself_is_still_refused(stack):
    client, fake = stack
    status, body = await post(client, {**BASE, "use_beam_search": True, "length_penalty": 1.3})
    assert status == 400 and body["error"]["param"] == "use_beam_search", body
