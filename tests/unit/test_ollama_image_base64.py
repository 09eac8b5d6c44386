"""Ollama images that are no standard base64 are its decode 400, 'illegal base64 data at input byte N', as Go's
encoding/json fails a []byte field (base64.StdEncoding.Decode) before any handler reads the body: a data URL
("data:image/png;base64,...") is byte 4 there (ollama/ollama-js#68, BerriAI/litellm#18338, dify#8170 report it).
Before, such an image got this text-only server's refusal of images, which tells the client nothing of its data URL."""
import orjson
import pytest

from gateway.errors import IMAGES_UNSUPPORTED
from gateway.go_base64 import base64_error

PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

# (text, the offset Go's decodeQuantum reports, None when it decodes), each worked through encoding/base64's
# decodeQuantum: a bad character is its own offset; a quantum cut by the end is where it began (StdEncoding pads);
# '=' after fewer than two characters is its own offset; a lone '=' where two are due is the end; bytes after the
# padding are garbage where they start; CR and LF are skipped anywhere.
GO_OFFSETS = [
    (f"data:image/png;base64,{PIXEL}", 4), ("hello world", 5), ("aGVsbG8", 4), ("a", 0), ("=", 0), ("a===", 1),
    ("aGVsbA=", 7), ("aGVsbG8=x", 8), ("aGVsbG8=\n\n", None), ("aGVs\r\nbG8=", None), ("aGVsbG8=", None),
    ("", None), (PIXEL, None), ("aGVsbG8=aGVs", 8), ("aGVs-bG8", 4), ("aGVsbA=\n=", None), ("aGVsbA=x", 6),
    ("é", 0), ("aGV!", 3), ("aG==aGVs", 4), ("aGVs\nbG8", 5), ("aGVs\nbG8=!", 9), (PIXEL[:-2] + "\n==", None),
]


@pytest.mark.parametrize("text, offset", GO_OFFSETS, ids=[repr(t[:24]) for t, _ in GO_OFFSETS])
def test_the_offset_is_gos(text, offset):
    assert base64_error(text) == (None if offset is None else f"illegal base64 data at input byte {offset}")


def test_a_large_image_is_read_to_its_first_bad_byte():
    """A photo's worth of base64 (4 MiB, MIME-wrapped or not) is checked by a scan, not a Python loop per quantum
    (a second per 4 MiB before): the offset is still the bad byte's."""
    big = PIXEL[:64] * (1 << 16)
    assert base64_error(big) is None and base64_error("\n".join([big[:76]] * 50000)) is None
    assert base64_error(big[:-9] + "!" + big[-8:]) == f"illegal base64 data at input byte {len(big) - 9}"


DATA_URL = f"data:image/png;base64,{PIXEL}"


@pytest.mark.parametrize("path, body", [
    ("/api/chat", {"messages": [{"role": "user", "content": "What is this?", "images": [DATA_URL]}]}),
    ("/api/chat", {"messages": [{"role": "user", "content": "a", "images": [PIXEL]},
                                {"role": "user", "content": "b", "images": [PIXEL, DATA_URL]}], "stream": False}),
    ("/api/generate", {"prompt": "What is this?", "images": [DATA_URL]}),
    ("/api/generate", {"images": [DATA_URL]}),
    ("/api/chat", {"messages": [], "images": [PIXEL], "keep_alive": 0}),
], ids=["chat data url", "chat second message", "generate data url", "generate load", "chat images no field"])
async def test_a_data_url_is_ollamas_base64_error(stack, path, body):
    client, servicer = stack
    response = await client.post(path, json={"model": "fake-model", **body})
    answer = orjson.loads(await response.read())
    assert not servicer.script.requests
    if "messages" in body and not body["messages"]:
        # ChatRequest has no images field: encoding/json skips the key, and this is an unload.
        assert response.status == 200 and answer["done_reason"] == "unload"
        return
    assert response.status == 400 and answer == {"error": "illegal base64 data at input byte 4"}


async def test_base64_images_still_get_the_text_only_refusal(stack):
    client, _ = stack
    response = await client.post("/api/generate", json={"model": "fake-model", "prompt": "hi", "images": [PIXEL]})
    assert response.status == 400 and orjson.loads(await response.read()) == {"error": IMAGES_UNSUPPORTED}
