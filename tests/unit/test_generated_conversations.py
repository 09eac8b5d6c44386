"""Unit tests: random but valid conversations (tests/unit/conversation_gen.py, seeded) sent through every API that can
say them (OpenAI chat, tokenize and render, llama-server's apply-template, LM Studio's /api/v0 and /api/v1/chat,
Anthropic messages, Responses, Ollama's /api/chat and /api/generate), each prompt compared token for token with
transformers' apply_chat_template (sanitize_control_tokens=True) of the OpenAI messages that API's reference server
makes of the body (tests/unit/conversation_routes.py), on the tiny checkpoint's template and on the official Qwen3.5
one (tests/unit/templates/qwen3_5.jinja, Qwen/Qwen3.5's chat_template.jinja) served as the checkpoint's. A
conversation transformers refuses (the Qwen3.5 template's raise_exception) is a 400 on every route, but one the
OpenAI-shaped routes cure by folding its system and developer messages into one leading system message (a developer
role, a system message after the first: gateway.chat_prompt.render_template)."""
import os

import jinja2
import orjson
import pytest
from tokenizers import Tokenizer

from gateway.fake_scheduler import FakeServing, fake_gateway
from tests.unit.conversation_gen import conversation
from tests.unit.conversation_routes import ROUTES, one_system
from tests.unit.test_chat_template_oracle import HF_FIELDS, hf_tokenizer, oracle_messages
from tests.unit.test_template_hf_sandbox import TINY

QWEN3_5 = os.path.join(os.path.dirname(__file__), "templates", "qwen3_5.jinja")
TEMPLATES = ("checkpoint", "qwen3.5")
BLOCKS = [range(start, start + 40) for start in range(0, 120, 40)]
# The OpenAI-shaped routes: vLLM's chat, tokenize and render, llama-server's apply-template (the text), LM Studio's.
OPENAI_ROUTES = ("/v1/chat/completions", "/v1/tokenize", "/v1/chat/completions/render", "/apply-template",
                 "/api/v0/chat/completions")
# The route that counts a body's prompt without generating, beside the one that generates.
COUNT_ROUTES = {"/v1/messages": "/v1/messages/count_tokens", "/v1/responses": "/v1/responses/input_tokens"}


def template_source(template: str):
    if template == "checkpoint":
        return None
    with open(QWEN3_5, encoding="utf-8") as f:
        return f.read()


@pytest.fixture(params=TEMPLATES)
async def served_template(request):
    """(client, fake, template source or None for the checkpoint's): the gateway over a fake scheduler with the tiny
    model's tokenizer, serving that template as the checkpoint's."""
    source = template_source(request.param)
    fake = FakeServing(Tokenizer.from_file(os.path.join(TINY, "tokenizer.json")), max_context_len=65536,
                       template=source)
    fake.script.reply = "ok"
    async with fake_gateway(fake) as (client, _):
        yield client, fake, source


def oracle(messages: list, fields: dict, source):
    """transformers' prompt ids for OpenAI messages and body fields, or None where its template refuses them."""
    kwargs = {key: fields[key] for key in HF_FIELDS if key in fields}
    kwargs.setdefault("add_generation_prompt", True)
    if kwargs.get("reasoning_effort"):
        kwargs["enable_thinking"] = True
    kwargs.update(fields.get("chat_template_kwargs", {}))
    if source is not None:
        kwargs["chat_template"] = source
    try:
        ids = hf_tokenizer().apply_chat_template(oracle_messages(messages), tokenize=True,
                                                sanitize_control_tokens=True, **kwargs)
    except (jinja2.exceptions.TemplateError, ValueError):
        # The template's raise_exception, or a final message transformers cannot continue.
        return None
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


async def prompt_of(client, fake, path: str, body: dict):
    """(status, the prompt ids the route sent or answered: the text for /apply-template)."""
    response = await client.post(path, data=orjson.dumps(body))
    out = orjson.loads(await response.read())
    if response.status != 200:
        return response.status, out
    if path == "/apply-template":
        return 200, out["prompt"]
    if path.endswith("tokenize"):
        return 200, out["tokens"]
    if path.endswith("render"):
        return 200, out["token_ids"]
    return 200, list(fake.script.requests[-1].prompt_token_ids)


def disagreement(seed: int, path: str, expected, status: int, got):
    """None when the route agrees with transformers, else a line saying where they part."""
    if expected is None:
        return None if status == 400 else f"seed {seed} {path}: transformers refuses, the route answered {status}"
    if status != 200:
        return f"seed {seed} {path}: {status} {got}"
    if path == "/apply-template":
        expected = hf_tokenizer().decode(expected)
    if got == expected:
        return None
    at = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))
    show = (lambda ids: ids[max(0, at - 20):at + 20]) if path == "/apply-template" else \
        (lambda ids: hf_tokenizer().decode(ids[max(0, at - 8):at + 8]))
    return f"seed {seed} {path}: from {at}: expected {show(expected)!r}, got {show(got)!r}"


@pytest.mark.parametrize("seeds", BLOCKS, ids=lambda seeds: f"seeds-{seeds.start}-{seeds.stop - 1}")
async def test_openai_routes(served_template, seeds):
    client, fake, source = served_template
    faults = []
    for seed in seeds:
        # System and developer messages after the first: the Qwen3.5 template refuses them (tested once, seed 0-39).
        messages, fields = conversation(seed, odd_system=source is None or seed < 40)
        expected = oracle(messages, fields, source)
        if expected is None:
            # A template that refuses the system / developer messages where they stand gets them folded into one.
            expected = oracle(one_system(messages), fields, source)
        for path in OPENAI_ROUTES:
            body = {"model": "default", "messages": messages, **fields}
            if path in ("/v1/chat/completions", "/api/v0/chat/completions"):
                body["max_tokens"] = 1
            faults.append(disagreement(seed, path, expected, *await prompt_of(client, fake, path, body)))
    assert [fault for fault in faults if fault] == []


@pytest.mark.parametrize("seeds", BLOCKS, ids=lambda seeds: f"seeds-{seeds.start}-{seeds.stop - 1}")
@pytest.mark.parametrize("api", ROUTES)
async def test_other_apis(served_template, api, seeds):
    client, fake, source = served_template
    faults, num_sent = [], 0
    for seed in seeds:
        messages, fields = conversation(seed, odd_system=source is None)
        shaped = ROUTES[api](messages, fields)
        if shaped is None:
            continue
        path, body, openai_messages, openai_fields = shaped
        expected = oracle(openai_messages, openai_fields, source)
        status, got = await prompt_of(client, fake, path, {"model": "default", **body})
        faults.append(disagreement(seed, path, expected, status, got))
        num_sent += 1
        if path in COUNT_ROUTES and expected is not None:
            response = await client.post(COUNT_ROUTES[path], data=orjson.dumps({"model": "default", **body}))
            counted = (await response.json()).get("input_tokens")
            faults.append(None if counted == len(expected) else f"seed {seed} {COUNT_ROUTES[path]}: {counted} tokens, "
                                                                   f"the prompt has {len(expected)}")
    assert [fault for fault in faults if fault] == []
    assert num_sent >= 5   # the API can say a share of the conversations


@pytest.mark.parametrize("seeds", BLOCKS[:1], ids=lambda seeds: f"seeds-{seeds.start}-{seeds.stop - 1}")
async def test_responses_continued_with_previous_response_id(served_template, seeds):
    """The prompt of a response continued by previous_response_id is the earlier input, its answer (reasoning and
    text, as the output items replay them) and the new input, as the whole conversation sent at once renders."""
    client, fake, source = served_template
    fake.script.reply = "plan</think>\n\nanswer"
    faults, num_sent = [], 0
    for seed in seeds:
        shaped = ROUTES["responses"](*conversation(seed, odd_system=source is None))
        if shaped is None:
            continue
        path, body, openai_messages, openai_fields = shaped
        response = await client.post(path, data=orjson.dumps({"model": "default", **body, "max_output_tokens": 64}))
        first = orjson.loads(await response.read())
        later = {"model": "default", "previous_response_id": first.get("id"), "input": "next?",
                 **{key: body[key] for key in ("tools", "reasoning") if key in body}}
        status, got = await prompt_of(client, fake, path, later)
        answer = {"role": "assistant", "content": "answer", "reasoning_content": "plan"}
        expected = oracle(openai_messages + [answer, {"role": "user", "content": "next?"}], openai_fields, source)
        faults.append(disagreement(seed, f"{path} previous_response_id", expected, status, got))
        num_sent += 1
    assert [fault for fault in faults if fault] == []
    assert num_sent >= 5
