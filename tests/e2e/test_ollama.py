"""End to end: the official `ollama` client and raw NDJSON (httpx) against scheduler + worker + gateway."""
import os

import httpx
import ollama
import orjson
import pytest
import torch


GREEDY = {"temperature": 0, "seed": 7}
HELLO = [{"role": "user", "content": "Say hello in three words."}]


@pytest.fixture(scope="module")
def client(api_gateway):
    return ollama.Client(host=api_gateway, timeout=120)


def ndjson(response: httpx.Response) -> list:
    """Every line of an NDJSON body, decoded as strict UTF-8 JSON."""
    return [orjson.loads(line.decode("utf-8", errors="strict")) for line in response.content.splitlines() if line]


def assert_metrics(final: dict) -> None:
    for key in ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration", "prompt_eval_count",
                "eval_count"):
        assert isinstance(final[key], int) and final[key] > 0, (key, final[key])
    parts = final["load_duration"] + final["prompt_eval_duration"] + final["eval_duration"]
    assert final["prompt_eval_duration"] + final["eval_duration"] <= parts <= final["total_duration"]


def assert_alive(http: httpx.Client) -> None:
    """The server still answers a generation after whatever came before."""
    response = http.post("/api/generate", json={"model": "default", "prompt": "Hi", "stream": False,
                                                "options": {"num_predict": 4, **GREEDY}})
    assert response.status_code == 200, response.text
    assert response.json()["done"] is True


def test_root_version_head(http):
    root = http.get("/")
    assert root.status_code == 200 and root.text == "Ollama is running"
    head = http.head("/")
    assert head.status_code == 200 and head.content == b""
    assert http.get("/api/version").json() == {"version": "0.33.3"}
    assert http.head("/api/tags").status_code == 200


def test_list_show_ps(client):
    listed = client.list()
    assert [m.model for m in listed.models] == ["tiny:latest"]
    entry = listed.models[0]
    assert entry.size > 0 and len(entry.digest) == 64 and entry.details.family == "qwen3_5"
    for name in ("tiny", "tiny:latest", "default"):
        shown = client.show(name)
        assert shown.modelinfo["qwen3_5.context_length"] == 8192
        # The tiny checkpoint's text_config, under Ollama's GGUF names (x/server/show.go buildModelInfo).
        assert {key: shown.modelinfo[f"qwen3_5.{key}"] for key in ("embedding_length", "block_count",
                "attention.head_count", "attention.head_count_kv", "feed_forward_length", "vocab_size")} == {
            "embedding_length": 64, "block_count": 8, "attention.head_count": 4, "attention.head_count_kv": 2,
            "feed_forward_length": 128, "vocab_size": 1024}
        assert "completion" in shown.capabilities and "thinking" in shown.capabilities
        assert "<|im_start|>" in shown.template
        # The window a request without options.num_ctx gets, which Continue reads from here as its context length.
        assert "num_ctx                        8192" in shown.parameters.split("\n")
    running = client.ps()
    assert [(m.model, m.context_length) for m in running.models] == [("tiny:latest", 8192)]
    assert running.models[0].expires_at is not None
    # On the CPU none of it is in GPU memory (Ollama's size_vram 0, "100% CPU"); on a GPU all of it. The worker's
    # device: SPARKINFER_DEVICE (tests/conftest.py sets cpu unless the caller names one), "" = cuda where available
    device = os.environ.get("SPARKINFER_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    assert running.models[0].size_vram == (running.models[0].size if device.startswith("cuda") else 0)


def test_chat_streamed_pieces_equal_the_answer(client):
    options = {**GREEDY, "num_predict": 24}
    whole = client.chat(model="tiny", messages=HELLO, think=False, options=options)
    parts = list(client.chat(model="tiny:latest", messages=HELLO, think=False, options=options, stream=True))
    assert all(not p.done for p in parts[:-1]) and parts[-1].done
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert whole.message.role == "assistant" and whole.done_reason in ("stop", "length")
    assert parts[-1].done_reason == whole.done_reason and parts[-1].eval_count == whole.eval_count
    assert whole.prompt_eval_count == parts[-1].prompt_eval_count
    assert_metrics(dict(whole))
    assert_metrics(dict(parts[-1]))


def test_generate_streamed_pieces_equal_the_answer(client):
    options = {**GREEDY, "num_predict": 20}
    whole = client.generate(model="default", prompt="Once upon a time", system="Be brief.", think=False,
                            options=options)
    parts = list(client.generate(model="default", prompt="Once upon a time", system="Be brief.", think=False,
                                 options=options, stream=True))
    assert "".join(p.response for p in parts) == whole.response
    assert parts[-1].done and parts[-1].context == whole.context
    assert_metrics(dict(whole))
    assert_metrics(dict(parts[-1]))
    # context: the prompt's ids, then the generated ones.
    assert whole.prompt_eval_count < len(whole.context) <= whole.prompt_eval_count + whole.eval_count


def test_generate_context_continuation_and_raw(client):
    first = client.generate(model="tiny", prompt="1, 2, 3,", think=False, options={**GREEDY, "num_predict": 6})
    assert first.done_reason == "length" and first.eval_count == 6
    follow = client.generate(model="tiny", prompt=" and", think=False, context=first.context,
                             options={**GREEDY, "num_predict": 4})
    assert follow.prompt_eval_count > len(first.context)
    # Raw mode returns no context (Ollama's docs) and refuses one, in Ollama's words.
    raw = client.generate(model="tiny", prompt="1, 2, 3,", raw=True, options={**GREEDY, "num_predict": 6})
    assert raw.done_reason == "length" and raw.eval_count == 6 and raw.context is None
    with pytest.raises(ollama.ResponseError, match="raw mode does not support template, system, or context"):
        client.generate(model="tiny", prompt=" and", raw=True, context=first.context)


def test_thinking_comes_back_separately(client):
    options = {**GREEDY, "num_predict": 16}
    whole = client.chat(model="tiny", messages=HELLO, think=True, options=options)
    parts = list(client.chat(model="tiny", messages=HELLO, think=True, options=options, stream=True))
    assert "".join(p.message.thinking or "" for p in parts) == (whole.message.thinking or "")
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert whole.message.thinking or whole.message.content
    assert "<think>" not in whole.message.content
    gen = client.generate(model="tiny", prompt="Why?", think="high", options=options)
    assert gen.done and (gen.thinking or gen.response)


def test_load_unload_and_keep_alive(client):
    assert client.generate(model="tiny", prompt="").done_reason == "load"
    assert client.generate(model="tiny", prompt="", keep_alive=0).done_reason == "unload"
    assert client.chat(model="tiny", messages=[]).done_reason == "load"
    answer = client.chat(model="tiny", messages=HELLO, keep_alive="5m", options={**GREEDY, "num_predict": 2})
    assert answer.done and answer.eval_count >= 1


def test_num_ctx_above_the_model_is_the_models_window_as_ollama_clamps_it(client):
    reply = client.generate(model="tiny", prompt="x", options={"num_ctx": 262144, "num_predict": 2, **GREEDY})
    assert reply.done and reply.done_reason == "length" and reply.eval_count == 2


UNSUPPORTED_CALLS = [
    ("embed", lambda c: c.embed(model="tiny", input="hi"), 501, "embeddings"),
    ("embeddings", lambda c: c.embeddings(model="tiny", prompt="hi"), 501, "embeddings"),
    ("pull", lambda c: c.pull("llama3"), 501, "pulling"),
    ("push", lambda c: c.push("tiny"), 501, "pushing"),
    ("create", lambda c: c.create(model="mine", from_="tiny"), 501, "creating"),
    ("copy", lambda c: c.copy("tiny", "mine"), 501, "copying"),
    ("delete", lambda c: c.delete("tiny"), 501, "deleting"),
    ("unknown model", lambda c: c.chat(model="llama3", messages=HELLO), 404, "not found"),
    # a keyword the grammar has no rule for (not, uniqueItems) is left unenforced, as Ollama's grammar skips it; a
    # pattern no grammar reads is refused
    ("format unenforceable", lambda c: c.chat(model="tiny", messages=HELLO,
                                              format={"type": "string", "pattern": "^(?=a)"}),
     400, "format cannot be enforced"),
    ("format bad schema", lambda c: c.generate(model="tiny", prompt="x", format={"type": "objet"}), 400, "format"),
    ("suffix", lambda c: c.generate(model="tiny", prompt="def f(", suffix="return 1"), 400,
     "registry.ollama.ai/library/tiny:latest does not support insert"),
    ("images", lambda c: c.generate(model="tiny", prompt="x", images=[b"\x89PNG"]), 400,
     "image input is not supported"),
    ("num_predict a string", lambda c: c.generate(model="tiny", prompt="x", options={"num_predict": "2"}), 400,
     'option "num_predict" must be of type integer'),
    ("use_mmap not a boolean", lambda c: c.generate(model="tiny", prompt="x", options={"use_mmap": "yes"}), 400,
     'option "use_mmap" must be of type boolean'),
    # a typical_p past 1 or a negative temperature is clamped as Ollama's sampler does (108691b); past the server's
    # own bounds it is still a 400
    ("temperature above 100", lambda c: c.generate(model="tiny", prompt="x", options={"temperature": 150}), 400,
     "temperature"),
    ("bad think", lambda c: c.generate(model="tiny", prompt="x", think="sometimes"), 400, "think"),
]


@pytest.mark.parametrize("name,call,status,reason", UNSUPPORTED_CALLS, ids=[c[0] for c in UNSUPPORTED_CALLS])
def test_unsupported_gets_status_and_reason(client, http, name, call, status, reason):
    with pytest.raises(ollama.ResponseError) as info:
        result = call(client)
        # Streaming helpers (pull, push, create) raise on iteration.
        for _ in result if hasattr(result, "__next__") else ():
            pass
    assert info.value.status_code == status
    assert reason in info.value.error
    assert_alive(http)


def test_pulling_the_served_model_succeeds(client):
    """As Ollama's pull of a model it has up to date: clients that pull before use go on."""
    assert client.pull("tiny").status == "success"
    assert [progress.status for progress in client.pull("tiny", stream=True)][-1] == "success"


def test_unknown_option_ignored_and_bad_json_bodies(http):
    # Like Ollama: an unknown option is logged and ignored.
    extra = http.post("/api/generate", json={"model": "tiny", "prompt": "x", "stream": False,
                                              "options": {"num_gqa": 8, "num_predict": 2}})
    assert extra.status_code == 200 and extra.json()["done"] is True
    broken = http.post("/api/chat", content=b"{not json", headers={"Content-Type": "application/json"})
    assert broken.status_code == 400
    assert broken.json() == {"error": "invalid character 'n' looking for beginning of object key string"}
    missing = http.post("/api/chat", json={"messages": HELLO})
    assert missing.status_code == 400 and missing.json() == {"error": "model is required"}
    assert_alive(http)


def test_repeat_last_n_window_reaches_the_worker(http):
    """Ollama's repeat_last_n with a repeat_penalty (a 400 before) is the penalty's window in the worker's sampler."""
    body = {"model": "tiny", "prompt": "1, 2, 3,", "raw": True, "stream": False,
            "options": {**GREEDY, "num_predict": 6, "repeat_penalty": 1.3, "repeat_last_n": 8}}
    answer = http.post("/api/generate", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["done_reason"] == "length" and answer.json()["eval_count"] == 6


def test_the_docs_every_option_example_runs_on_the_worker(http):
    """docs/api.md 'Generate request (With options)': typical_p (a 400 before) and top_p 0 reach the real sampler."""
    options = {"num_keep": 5, "seed": 42, "num_predict": 8, "top_k": 20, "top_p": 0.9, "min_p": 0.0, "typical_p": 0.7,
               "repeat_last_n": 33, "temperature": 0.8, "repeat_penalty": 1.2, "presence_penalty": 1.5,
               "frequency_penalty": 1.0, "penalize_newline": True, "numa": False, "num_ctx": 1024, "num_batch": 2,
               "num_gpu": 1, "main_gpu": 0, "use_mmap": True, "num_thread": 8}
    body = {"model": "tiny", "prompt": "Why is the sky blue?", "stream": False, "think": False, "options": options}
    first = http.post("/api/generate", json=body)
    assert first.status_code == 200, first.text
    assert first.json()["done_reason"] == "length" and first.json()["eval_count"] == 8
    again = http.post("/api/generate", json=body).json()
    assert again["response"] == first.json()["response"]  # seeded
    greedy = http.post("/api/generate", json={**body, "options": {"top_p": 0, "num_predict": 8, "temperature": 1.5}})
    assert greedy.status_code == 200 and greedy.json()["eval_count"] == 8
