"""Ollama's routes read a body orjson refuses and Go's json.Decoder reads (bytes after the object, bytes that are no
UTF-8, a lone surrogate escape) with the json module's C scanner first (go_json.go_decode_fast), the Python scan
only wording what neither reads. The fast read gives what go_decode gives wherever Go reads the body, and refuses
wherever Go refuses it; on every Ollama body route a large such body costs little CPU (before: a 3 MB /api/generate
body with a byte after its object took 11 s of CPU, 17 s with a byte that is no UTF-8 in its prompt)."""
import json
import random
import time

import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.go_json import go_decode, go_decode_error, go_decode_fast

OBJECT = {"model": "m", "prompt": "hé 😀", "n": [1, -2, 3.5, 1e300, 10 ** 30], "o": {"k": [True, False, None, ""]}}
TAILS = [b"", b" ", b" x", b"\n{}", b"}", b"\xff", b"\x00", b" garbage]", b'{"a":1}', b"NaN"]
SPOILERS = [(b'"h\\u00e9', b'"h\\ud800'), (b'"h\\u00e9', b'"h\\udc00\\ud800'), (b"h\\u00e9", b"h\\u00e9\xff\xfe"),
            (b"1e+300", b"1e400"), (b"1e+300", b"NaN"), (b"1e+300", b"-Infinity"), (b"3.5", b"3."),
            (b"3.5", b"03"), (b'"m"', b'"m\x01"'), (b'"m"', b"'m'"), (b"true", b"tru"), (b", ", b",, "),
            (b'"k"', b'"k\xc3"'), (b"{", b"\xef\xbb\xbf{"), (b"{", b" \t\r\n{"), (b"[1", b"[" * 70 + b"1" + b"]" * 69),
            (b'"hi"', b'"h\\ud83d\\ude00"'), (b'"m"', b'"\xed\xa0\x80"')]


def _bodies() -> list:
    base = json.dumps(OBJECT).encode()
    out = [base + tail for tail in TAILS]
    for old, new in SPOILERS:
        out += [base.replace(old, new, 1) + tail for tail in TAILS[:4]]
    rng = random.Random(5)
    for _ in range(300):
        body = bytearray(rng.choice(out))
        body[rng.randrange(len(body))] = rng.choice(b'{}[]",:\\ \xff\x00a1-.eE')
        out.append(bytes(body))
    return out


def _slow(raw: bytes):
    """What the Python scan makes of raw: ('value', v), ('error', words), ('refused', None) where Go's types refuse
    it, or ('deep', message) past the gateway's depth."""
    words = go_decode_error(raw) if raw.strip() else "empty"
    if words is not None:
        return "error", words
    try:
        return "value", go_decode(raw)
    except (ValueError, RecursionError):
        return "refused", None
    except InvalidRequest as exc:
        return "deep", exc.message


def test_the_fast_read_is_the_go_read_and_refuses_what_go_refuses():
    faults = []
    for raw in _bodies():
        kind, value = _slow(raw)
        try:
            fast = go_decode_fast(raw)
        except (ValueError, RecursionError):
            fast = "raised"
        except InvalidRequest as exc:
            fast = ("deep", exc.message)
        if kind == "deep":
            ok = fast in ("raised", (kind, value))
        else:
            ok = fast in ("raised", value) if kind == "value" else fast == "raised"
        if not ok:
            faults.append(f"{raw[:80]!r}: Go {kind} {str(value)[:60]}, fast {str(fast)[:60]}")
    assert not faults, "\n".join(faults[:20])


BIG = [1] * 1_500_000
CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "stream": False,
        "options": {"num_predict": 2}, "x": BIG}
ROUTES = {
    "chat": ("/api/chat", CHAT),
    "generate": ("/api/generate", {"model": "fake-model", "prompt": "hi", "stream": False,
                                   "options": {"num_predict": 2}, "x": BIG}),
    "show": ("/api/show", {"model": "fake-model", "note": "hi", "x": BIG}),
    "embed": ("/api/embed", {"model": "fake-model", "input": "hi", "x": BIG}),
}
SPOIL = {"byte-after": lambda raw: raw + b" x", "not-utf8": lambda raw: raw.replace(b'"hi"', b'"h\xffi"', 1),
         "lone-surrogate": lambda raw: raw.replace(b'"hi"', b'"h\\ud800i"', 1)}


@pytest.mark.parametrize("spoil", list(SPOIL))
@pytest.mark.parametrize("route", list(ROUTES))
async def test_a_large_body_go_reads_is_read_as_go_reads_it_at_little_cost(stack, route, spoil):
    client, fake = stack
    fake.script.reply = "ok"
    path, body = ROUTES[route]
    clean = await client.post(path, data=orjson.dumps(body))
    expected = (clean.status, set(orjson.loads(await clean.read())))
    started = time.process_time()
    response = await client.post(path, data=SPOIL[spoil](orjson.dumps(body)))
    raw = await response.read()
    cpu = time.process_time() - started
    # As the same body without the spoiling (Ollama's answer: 200, or its 501 for embeddings of a generative model).
    assert (response.status, set(orjson.loads(raw))) == expected, raw[:300]
    # CPU time, not wall time, so that a loaded machine does not fail it: 3-4 s before, about 0.5 s after.
    assert cpu < 1.5, f"{cpu:.1f} s of CPU to read a {len(raw)}-byte body"
