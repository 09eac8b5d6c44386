"""End to end: the official `openai` client against real scheduler + worker + gateway processes (tiny model)."""
import asyncio
import time

import grpc
import httpx
import openai
import orjson
import pytest

from proto import pb, pb_grpc

NO_THINK = {"enable_thinking": False}
HELLO = [{"role": "user", "content": "Say hello in three words."}]


@pytest.fixture(scope="module")
def client(api_gateway):
    return openai.OpenAI(base_url=f"{api_gateway}/v1", api_key="unused", timeout=120, max_retries=0)


def token_bytes(name: str) -> bytes:
    """The bytes of a legacy logprobs token name (OpenAI's "bytes:\\xe6\\x97" form for part of a character)."""
    if name.startswith("bytes:"):
        return bytes(int(pair, 16) for pair in name[len("bytes:"):].split("\\x")[1:])
    return name.encode()


def scheduler_load(grpc_addr: str) -> "pb.LoadResponse":
    with grpc.insecure_channel(grpc_addr) as channel:
        return pb_grpc.ServingStub(channel).Load(pb.LoadRequest(), timeout=2)


def sse_payloads(raw: bytes) -> list:
    """Every `data:` payload of an SSE body, decoded as strict UTF-8 (JSON, or the literal [DONE])."""
    out = []
    for block in raw.decode("utf-8", errors="strict").split("\n\n"):
        if block.startswith("data: "):
            data = block[6:]
            out.append(data if data == "[DONE]" else orjson.loads(data))
    return out


def test_list_models(client):
    models = client.models.list().data
    assert len(models) == 1 and models[0].id == "tiny" and models[0].owned_by == "sparkinfer"
    assert models[0].model_extra["max_model_len"] == 8192


def test_chat_stream_equals_non_stream_greedy(client):
    kwargs = dict(model="tiny", messages=HELLO, max_tokens=24, temperature=0, seed=3)
    full = client.chat.completions.create(**kwargs)
    choice = full.choices[0]
    assert choice.finish_reason in ("stop", "length") and full.object == "chat.completion"
    assert full.id.startswith("chatcmpl-") and full.model == "tiny"
    stream = client.chat.completions.create(**kwargs, stream=True)
    content, reasoning, finish = "", "", None
    for chunk in stream:
        delta = chunk.choices[0].delta
        content += delta.content or ""
        reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
        finish = chunk.choices[0].finish_reason or finish
    assert content == (choice.message.content or "")
    assert reasoning == ((choice.message.model_extra or {}).get("reasoning_content") or "")
    assert finish == choice.finish_reason
    assert full.usage.completion_tokens <= 24 and full.usage.total_tokens == full.usage.prompt_tokens + \
        full.usage.completion_tokens


def test_thinking_off_puts_everything_in_content(client, http):
    result = client.chat.completions.create(model="default", messages=HELLO, max_tokens=16, temperature=0,
                                            extra_body=NO_THINK)
    tokens = http.post("/v1/tokenize", json={"messages": HELLO, **NO_THINK}).json()
    assert result.usage.prompt_tokens == tokens["count"]
    text = http.post("/v1/completions", json={"prompt": tokens["tokens"], "max_tokens": 16, "temperature": 0}).json()
    raw = text["choices"][0]["text"]
    if "<think>" not in raw and "</think>" not in raw:
        assert result.choices[0].message.content == raw


def test_completions_and_usage_equal_token_counts(client, http):
    prompt = "Count: 1, 2, 3,"
    result = client.completions.create(model="tiny", prompt=prompt, max_tokens=12, temperature=0, logprobs=0)
    choice = result.choices[0]
    num_prompt = http.post("/v1/tokenize", json={"prompt": prompt}).json()["count"]
    assert result.object == "text_completion" and result.usage.prompt_tokens == num_prompt
    # As vLLM, the eos that ended it is counted and has its logprobs entry, but is not in the text.
    assert result.usage.completion_tokens == len(choice.logprobs.tokens)
    if choice.finish_reason == "length":
        assert result.usage.completion_tokens == 12
    else:
        assert choice.logprobs.tokens[-1] in ("<|im_end|>", "<|endoftext|>")
    text_tokens = choice.logprobs.tokens[:-1] if choice.finish_reason == "stop" else choice.logprobs.tokens
    joined = b"".join(token_bytes(name) for name in text_tokens).decode("utf-8", "replace")
    assert joined.replace("\ufffd", "") == choice.text.replace("\ufffd", "")


async def test_eight_concurrent_streams_complete(api_gateway):
    aclient = openai.AsyncOpenAI(base_url=f"{api_gateway}/v1", api_key="unused", timeout=120, max_retries=0)

    async def one(i):
        stream = await aclient.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": f"Story number {i}"}], max_tokens=20,
            temperature=0.8, seed=i, stream=True, stream_options={"include_usage": True}, extra_body=NO_THINK)
        finish, usage = None, None
        async for chunk in stream:
            if chunk.choices:
                finish = chunk.choices[0].finish_reason or finish
            usage = chunk.usage or usage
        return finish, usage

    results = await asyncio.gather(*(one(i) for i in range(8)))
    await aclient.close()
    assert all(finish in ("stop", "length") and usage.completion_tokens >= 1 for finish, usage in results)


def test_stop_string_spanning_tokens_stream_and_not(client, http):
    base = dict(model="tiny", prompt="Once upon a time", max_tokens=40, temperature=0)
    free = client.completions.create(**base, logprobs=0).choices[0]
    tokens = free.logprobs.tokens
    assert len(tokens) >= 8, "need a longer greedy continuation for this check"
    offsets = free.logprobs.text_offset
    stop = free.text[offsets[3] + 1:offsets[6]]
    assert len(stop) >= 2
    expected = free.text[:free.text.find(stop)]
    plain = client.completions.create(**base, stop=[stop]).choices[0]
    assert plain.text == expected and plain.finish_reason == "stop" and stop not in plain.text
    streamed = "".join(c.choices[0].text for c in client.completions.create(**base, stop=[stop], stream=True))
    assert streamed == expected
    chat = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=30, temperature=0,
                                          extra_body=NO_THINK)
    text = chat.choices[0].message.content
    if len(text) > 6:
        chat_stop = text[2:6]
        again = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=30, temperature=0,
                                               stop=chat_stop, extra_body=NO_THINK).choices[0]
        assert again.message.content == text[:text.find(chat_stop)] and again.finish_reason == "stop"


def test_disconnect_mid_stream_frees_the_slot(api_gateway, engine_stack):
    body = {"model": "tiny", "prompt": "Count from 1 to 5000, one number per line:\n1\n2\n3\n", "max_tokens": 4000,
            "temperature": 0, "stream": True, "ignore_eos": True}   # the random tiny model may stop early
    with httpx.Client(base_url=api_gateway, timeout=60) as session:
        with session.stream("POST", "/v1/completions", json=body) as response:
            lines = response.iter_lines()
            seen = sum(1 for line, _ in zip(lines, range(4)) if line.startswith("data: "))
            assert seen >= 2 and scheduler_load(engine_stack.grpc_addr).num_running == 1
    gone = time.monotonic()
    while scheduler_load(engine_stack.grpc_addr).num_running and time.monotonic() - gone < 2.0:
        time.sleep(0.05)
    assert scheduler_load(engine_stack.grpc_addr).num_running == 0
    probe = httpx.post(f"{api_gateway}/v1/completions", json={"model": "tiny", "prompt": "Hi", "max_tokens": 8},
                       timeout=10)
    assert probe.status_code == 200 and probe.json()["usage"]["completion_tokens"] >= 1


BAD = [
    ("malformed-json", "/v1/chat/completions", b'{"model": "tiny", "messages": [', 400, "invalid_json"),
    ("messages-empty", "/v1/chat/completions", {"model": "tiny", "messages": []}, 400, "empty_array"),
    ("messages-wrong-type", "/v1/chat/completions", {"model": "tiny", "messages": "hi"}, 400, "invalid_type"),
    ("max-tokens-zero", "/v1/chat/completions", {"messages": HELLO, "max_tokens": 0}, 400, "invalid_value"),
    ("max-tokens-string", "/v1/completions", {"prompt": "hi", "max_tokens": "ten"}, 400, "invalid_type"),
    ("temperature-negative", "/v1/chat/completions", {"messages": HELLO, "temperature": -1}, 400, "invalid_value"),
    ("unknown-model", "/v1/chat/completions", {"model": "gpt-4o", "messages": HELLO}, 404, "model_not_found"),
    ("context-exceeded", "/v1/completions", {"prompt": "hi", "max_tokens": 9000}, 400, "context_length_exceeded"),
    ("tool-choice-required-no-tools", "/v1/chat/completions", {"messages": HELLO, "tool_choice": "required"},
     400, "invalid_value"),
    ("image-input", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]},
     400, "unsupported"),
]


@pytest.mark.parametrize("path,body,status,code", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_gets_status_and_error_shape(http, path, body, status, code):
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    response = http.post(path, content=content, headers={"Content-Type": "application/json"})
    error = response.json()["error"]
    assert response.status_code == status and set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code and error["message"]


def test_openai_client_raises_typed_errors(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=HELLO)
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model="tiny", prompt="hi", max_tokens=100_000)
    assert "8192" in info.value.message and info.value.code == "context_length_exceeded"
    # Embeddings: 501 with the reason (design.md section 3), at once: x-should-retry: false stops the SDK's retries.
    sent = []
    retrying = openai.OpenAI(base_url=str(client.base_url), api_key="unused", max_retries=2,
                             http_client=httpx.Client(event_hooks={"request": [sent.append]}))
    with pytest.raises(openai.APIStatusError) as info:
        retrying.embeddings.create(model="tiny", input="hi")
    assert info.value.status_code == 501 and info.value.code == "embeddings_unsupported"
    assert len(sent) == 1  # no retry (max_retries=2 would send 3)


def test_server_still_serves_after_bad_inputs(client):
    result = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=4, extra_body=NO_THINK)
    assert result.choices[0].finish_reason in ("stop", "length") and result.usage.completion_tokens >= 1


def test_greedy_http_equals_transformers_generate(client, http, reference):
    import torch
    model, tokenizer = reference
    messages = [{"role": "user", "content": "Write one sentence about the sea."}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, enable_thinking=False,
                                        tokenize=True, return_dict=False)
    ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
    assert http.post("/v1/tokenize", json={"messages": messages, **NO_THINK}).json()["tokens"] == ids
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False, top_k=None, top_p=None,
                             temperature=None, eos_token_id=[1017, 1015], pad_token_id=1015)
    expected = tokenizer.decode(out[0, len(ids):].tolist(), skip_special_tokens=True)
    assert len(out[0]) - len(ids) >= 4 and expected, "reference continuation too short to compare"
    result = client.completions.create(model="tiny", prompt=ids, max_tokens=24, temperature=0)
    assert result.choices[0].text == expected


def test_sampling_fields_reach_the_sampler(client, http):
    token_id = http.post("/v1/tokenize", json={"prompt": " fox"}).json()["tokens"][-1]
    forced = client.completions.create(model="tiny", prompt="Hi", max_tokens=5, temperature=0,
                                       logit_bias={str(token_id): 100}, logprobs=0).choices[0]
    detok = http.post("/v1/detokenize", json={"tokens": [token_id]}).json()["prompt"]
    assert forced.logprobs.tokens == [detok] * 5
    seeded = [client.completions.create(model="tiny", prompt="Hi", max_tokens=12, temperature=1.0,
                                        seed=42).choices[0].text for _ in range(2)]
    assert seeded[0] == seeded[1]
    two = client.completions.create(model="tiny", prompt="Hi", max_tokens=12, temperature=1.0, seed=42, n=2)
    assert two.choices[0].text == seeded[0] and len(two.choices) == 2
    penalized = client.completions.create(model="tiny", prompt="Hi", max_tokens=5, presence_penalty=1.5,
                                          frequency_penalty=1.0, top_p=0.9, user="me",
                                          extra_body={"top_k": 5, "min_p": 0.05, "repetition_penalty": 1.1})
    assert penalized.usage.completion_tokens >= 1


def test_seed_minus_one_samples_at_random(client):
    # vLLM's -1 is no seed (SamplingParams.__post_init__); it was the fixed seed 2^64 - 1, the same text every time.
    texts = {client.completions.create(model="tiny", prompt="Hi", max_tokens=12, temperature=1.0,
                                       seed=-1).choices[0].text for _ in range(3)}
    assert len(texts) > 1, texts


def test_the_stop_token_is_in_logprobs_and_in_the_text_only_on_request(http):
    """A stop_token_ids token forced by logit_bias ends the request at once: as vLLM, it is counted, has its logprobs
    entry (through scheduler and wire), and is in the text only with include_stop_str_in_output."""
    token_id = http.post("/v1/tokenize", json={"prompt": " fox"}).json()["tokens"][-1]
    body = {"model": "tiny", "prompt": "Hi", "max_tokens": 5, "temperature": 0, "logprobs": 1,
            "logit_bias": {str(token_id): 100}, "stop_token_ids": [token_id]}
    out = http.post("/v1/completions", json=body).json()
    choice = out["choices"][0]
    assert (choice["text"], choice["finish_reason"], choice["stop_reason"]) == ("", "stop", token_id)
    # top_logprobs: the sampled token first, then the raw top 1 (another token: the bias is not in raw logprobs).
    top = choice["logprobs"]["top_logprobs"][0]
    assert choice["logprobs"]["tokens"] == [" fox"] and list(top)[0] == " fox" and len(top) <= 2
    assert choice["logprobs"]["token_logprobs"][0] <= 0 and out["usage"]["completion_tokens"] == 1
    kept = http.post("/v1/completions", json={**body, "include_stop_str_in_output": True}).json()["choices"][0]
    assert kept["text"] == " fox" and kept["logprobs"]["tokens"] == [" fox"]
    chat = {"model": "tiny", "messages": HELLO, "max_tokens": 5, "temperature": 0, "logprobs": True, "stream": True,
            "logit_bias": {str(token_id): 100}, "stop_token_ids": [token_id], **NO_THINK}
    events = [e for e in sse_payloads(http.post("/v1/chat/completions", json=chat).content) if e != "[DONE]"]
    finish = events[-1]["choices"][0]
    assert finish["finish_reason"] == "stop" and [e["token"] for e in finish["logprobs"]["content"]] == [" fox"]
    assert not any(e["choices"][0]["delta"].get("content") for e in events)


def test_assistant_turn_sent_back_with_reasoning_and_tools_is_accepted(client):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    first = client.chat.completions.create(model="tiny", messages=HELLO, max_tokens=12, tools=tools)
    history = HELLO + [first.choices[0].message.model_dump(exclude_none=False),
                       {"role": "user", "content": "And now?"}]
    second = client.chat.completions.create(model="tiny", messages=history, max_tokens=8, tools=tools,
                                            extra_body={"chat_template_kwargs": {"preserve_thinking": True}})
    assert second.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert second.usage.prompt_tokens > first.usage.prompt_tokens
    call_turn = [{"role": "user", "content": "Weather in Paris?"},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": "call_1", "type": "function",
                      "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                 {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    third = client.chat.completions.create(model="tiny", messages=call_turn, max_tokens=4, tools=tools)
    assert third.choices[0].finish_reason in ("stop", "length", "tool_calls")
