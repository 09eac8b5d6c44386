"""Every JSON the gateway writes goes through gateway/json_out.dumps, which keeps integers beyond 64 bits exact
(orjson.dumps raises on them: a 500, or a stream cut). lmstudio_v1_shape, ollama_caps and ollama_options called
orjson.dumps directly."""
import json
import pathlib
import re

import gateway
from gateway import lmstudio_v1_shape

BIG = 2**70


def test_no_gateway_module_writes_json_with_orjson_directly():
    root = pathlib.Path(gateway.__file__).parent
    direct = [p.name for p in sorted(root.glob("*.py")) if p.name != "json_out.py"
              and re.search(r"\borjson\.dumps\(", p.read_text())]
    assert direct == []


def test_lmstudio_v1_event_keeps_a_big_integer():
    frame = lmstudio_v1_shape.sse_named({"type": "chat.end", "result": {"n": BIG}})
    assert frame.startswith(b"event: chat.end\ndata: ")
    assert json.loads(frame.split(b"data: ", 1)[1]) == {"type": "chat.end", "result": {"n": BIG}}
