"""/tokenize and /detokenize (fake scheduler) as llama.cpp server's clients call them: {"content": text} (its
tools/server handle_tokenize reads content, add_special, parse_special and with_pieces) answers {"tokens": ids},
and /detokenize's text comes back as llama.cpp's content beside vLLM's prompt."""
import orjson
import pytest


async def post(client, path: str, body: dict) -> tuple[int, dict]:
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


@pytest.mark.parametrize("path", ["/tokenize", "/v1/tokenize"])
async def test_llama_cpp_content_is_tokenized_as_a_prompt(stack, path):
    client, fake = stack
    status, body = await post(client, path, {"content": "Hello world", "add_special": False, "parse_special": True})
    assert status == 200, body
    ids = fake.tokenizer.encode("Hello world", add_special_tokens=False).ids
    assert body["tokens"] == ids and body["count"] == len(ids)
    status, body = await post(client, "/detokenize", {"tokens": ids})
    assert (status, body["content"], body["prompt"]) == (200, "Hello world", "Hello world")


async def test_with_pieces_gives_each_ids_text_or_bytes(stack):
    client, fake = stack
    status, body = await post(client, "/tokenize", {"content": "Hi é", "with_pieces": True})
    assert status == 200, body
    ids = fake.tokenizer.encode("Hi é", add_special_tokens=False).ids
    assert [entry["id"] for entry in body["tokens"]] == ids
    pieces = [entry["piece"] for entry in body["tokens"]]
    text = b"".join(piece.encode() if isinstance(piece, str) else bytes(piece) for piece in pieces).decode()
    assert text == "Hi é"
    # é is two byte tokens here: neither is whole UTF-8, so each comes as its byte.
    assert pieces[-2:] == [[0xC3], [0xA9]]


async def test_content_with_prompt_is_a_400(stack):
    client, fake = stack
    status, body = await post(client, "/tokenize", {"content": "a", "prompt": "b"})
    assert (status, body["error"]["message"]) == (400, "give exactly one of 'messages' or 'prompt' (or llama.cpp's "
                                                       "'content')")


@pytest.mark.parametrize("parse_special, as_token", [(None, True), (True, True), (False, False)],
                         ids=["absent", "true", "false"])
async def test_parse_special_false_reads_special_token_text_as_text(stack, parse_special, as_token):
    """llama.cpp's handle_tokenize: parse_special (default true) is common_tokenize's parse_special; false tokenizes
    '<|im_end|>' as the characters it is. It was accepted and ignored: the control token's id either way."""
    client, fake = stack
    request = {"content": "Hi<|im_end|>"} if parse_special is None else {"content": "Hi<|im_end|>",
                                                                          "parse_special": parse_special}
    status, body = await post(client, "/tokenize", request)
    assert status == 200, body
    end_id = fake.tokenizer.token_to_id("<|im_end|>")
    hi = fake.tokenizer.encode("Hi", add_special_tokens=False).ids
    if as_token:
        assert body["tokens"] == hi + [end_id]
    else:
        assert end_id not in body["tokens"] and len(body["tokens"]) > len(hi) + 1
        status, text = await post(client, "/detokenize", {"tokens": body["tokens"]})
        assert text["content"] == "Hi<|im_end|>"


async def test_content_mixing_strings_and_token_ids(stack):
    """llama.cpp's tokenize_mixed: a content list's strings are tokenized and its ids kept, in order ([12, "a", 34]).
    It was a 400 "... is not of type 'string'"."""
    client, fake = stack
    hello = fake.tokenizer.encode("Hello", add_special_tokens=False).ids
    world = fake.tokenizer.encode(" world", add_special_tokens=False).ids
    status, body = await post(client, "/tokenize", {"content": [7, "Hello", 9, " world"]})
    assert status == 200, body
    assert body["tokens"] == [7, *hello, 9, *world] and body["count"] == len(hello) + len(world) + 2
    status, body = await post(client, "/tokenize", {"content": ["Hi", 10 ** 9]})
    assert status == 400 and body["error"]["message"].startswith("content: token id 1000000000 is not in [0, "), body
