"""Sampler fields of the text-completion servers SillyTavern's sources target, read on /v1 (fake scheduler): do_sample
(below), and banned tokens on the sources that are not llama.cpp's: its
text-generation-webui and TabbyAPI sources send them as custom_token_bans, comma-separated ids ("5,7"), its Aphrodite
source as an id list, and its quoted bans as banned_strings (public/scripts/textgen-settings.js getCustomTokenBans).
Both were ignored (unknown fields): the banned tokens came out. The ids are never sampled now (a -100 bias) and the
strings are vLLM's bad_words."""
import pytest

BASE = {"prompt": "hi", "max_tokens": 4}


@pytest.mark.parametrize("bans", ["5,7", " 5 , 7 ,", [5, 7]], ids=["ooba", "spaces", "aphrodite"])
async def test_custom_token_bans_are_never_sampled(stack, bans):
    client, fake = stack
    response = await client.post("/v1/completions", json={**BASE, "custom_token_bans": bans})
    assert response.status == 200, await response.text()
    bias = dict(fake.script.requests[-1].sampling.logit_bias)
    assert bias == {5: -100.0, 7: -100.0}


async def test_an_empty_ban_list_bans_nothing(stack):
    client, fake = stack
    response = await client.post("/v1/completions", json={**BASE, "custom_token_bans": "", "banned_strings": []})
    assert response.status == 200
    request = fake.script.requests[-1]
    assert not dict(request.sampling.logit_bias) and not list(request.sampling.bad_words)


async def test_banned_strings_are_bad_words(stack):
    client, fake = stack
    response = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                                "banned_strings": ["Hello"], "max_tokens": 4})
    assert response.status == 200
    words = [list(word.ids) for word in fake.script.requests[-1].sampling.bad_words]
    assert fake.tokenizer.encode("Hello").ids in words


@pytest.mark.parametrize("bans, words", [("5,x", "comma-separated token ids"), ([99999], "token ids must be in")],
                         ids=["not ids", "past vocab"])
async def test_bad_bans_are_400s(stack, bans, words):
    client, fake = stack
    response = await client.post("/v1/completions", json={**BASE, "custom_token_bans": bans})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "custom_token_bans" and words in error["message"]
    assert fake.script.requests == []


@pytest.mark.parametrize("do_sample, temperature", [(False, 0.0), (True, 0.7), (None, 0.7)],
                         ids=["false", "true", "null"])
async def test_do_sample_false_is_greedy(stack, do_sample, temperature):
    """SillyTavern's text-generation-webui source sends do_sample (its preset's checkbox, true by default); false is
    greedy decoding there (transformers' generate), and was ignored here."""
    client, fake = stack
    response = await client.post("/v1/completions", json={**BASE, "temperature": 0.7, "do_sample": do_sample})
    assert response.status == 200
    assert abs(fake.script.requests[-1].sampling.temperature - temperature) < 1e-6


# TabbyAPI's own names (common/sampling.py BaseSamplerRequest): banned_tokens (custom_token_bans is its alias),
# allowed_tokens (allowed_token_ids'), each a list of ids or comma-separated ids, [] none; banned_strings one string or
# a list. They were unknown fields (ignored: the banned tokens came out) or a 400 for the string.
@pytest.mark.parametrize("extra, bias, allowed", [
    ({"banned_tokens": [5, 7]}, {5: -100.0, 7: -100.0}, []),
    ({"banned_tokens": "5,7"}, {5: -100.0, 7: -100.0}, []),
    ({"allowed_tokens": "7, 5"}, {}, [5, 7]),
    ({"allowed_tokens": [], "banned_tokens": ""}, {}, []),
], ids=["banned-list", "banned-string", "allowed", "empty"])
async def test_tabbyapi_token_lists(stack, extra, bias, allowed):
    client, fake = stack
    response = await client.post("/v1/completions", json={**BASE, **extra})
    assert response.status == 200, await response.text()
    sampling = fake.script.requests[-1].sampling
    assert dict(sampling.logit_bias) == bias and list(sampling.allowed_token_ids) == allowed


async def test_one_banned_string(stack):
    client, fake = stack
    response = await client.post("/v1/completions", json={**BASE, "banned_strings": "Hello"})
    assert response.status == 200, await response.text()
    words = [list(word.ids) for word in fake.script.requests[-1].sampling.bad_words]
    assert fake.tokenizer.encode("Hello").ids in words


async def test_bad_tabbyapi_ids_name_their_field(stack):
    client, fake = stack
    for name in ("banned_tokens", "allowed_tokens"):
        response = await client.post("/v1/completions", json={**BASE, name: "5,x"})
        error = (await response.json())["error"]
        assert response.status == 400 and error["param"] == name and name in error["message"], error
    assert fake.script.requests == []
