"""Unit tests: a chat template that reads a message's content only as a string (ChatML's classic
`'<|im_start|>' + message['content'] + ...`, `{{ message.content }}`) gets content sent as text parts as one string,
the parts joined by newlines, as vLLM renders it (chat_utils: such a template is its "string" content format, and
_parse_chat_message_content_parts joins the texts with "\\n"; llama.cpp joins them so for a template that does not
require typed content). A template that reads the parts (the shipped one) still gets them. Compared id for id with
transformers' apply_chat_template on the joined strings, on every chat route (fake scheduler)."""
import os

import orjson
import pytest
from tokenizers import Tokenizer

from gateway.fake_scheduler import FakeServing, fake_gateway
from tests.unit.test_chat_template_oracle import hf_tokenizer
from tests.unit.test_template_hf_sandbox import TINY

# The ChatML template of transformers' chat-templating docs and TRL: a list content is a TypeError (a 400 before).
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>'"
          " + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# Content printed as it is: a list rendered as Python's repr of its dicts before.
PRINTED = ("{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
           "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
PARTS = [{"type": "text", "text": "first line"}, {"type": "text", "text": "second 日本"}]
JOINED = "first line\nsecond 日本"


@pytest.fixture(params=[CHATML, PRINTED], ids=["chatml", "printed"])
async def string_stack(request):
    fake = FakeServing(Tokenizer.from_file(os.path.join(TINY, "tokenizer.json")), max_context_len=4096,
                       template=request.param)
    fake.script.reply = "ok"
    async with fake_gateway(fake) as (client, fake):
        yield client, fake, request.param


def oracle(template: str, messages: list) -> list:
    ids = hf_tokenizer().apply_chat_template(messages, chat_template=template, tokenize=True,
                                            add_generation_prompt=True, sanitize_control_tokens=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


USER = [{"role": "user", "content": JOINED}]
ROUTES = {
    "/v1/chat/completions": ({"messages": [{"role": "user", "content": PARTS}], "max_tokens": 1}, USER),
    "/v1/tokenize": ({"messages": [{"role": "user", "content": PARTS}]}, USER),
    "/v1/messages": ({"messages": [{"role": "user", "content": PARTS}], "max_tokens": 1}, USER),
    "system-and-tool": ({"messages": [{"role": "system", "content": PARTS}, {"role": "user", "content": "q"},
                                      {"role": "assistant", "content": PARTS},
                                      {"role": "tool", "tool_call_id": "c", "content": PARTS}], "max_tokens": 1},
                        [{"role": "system", "content": JOINED}, {"role": "user", "content": "q"},
                         {"role": "assistant", "content": JOINED}, {"role": "tool", "content": JOINED}]),
}


@pytest.mark.parametrize("route", ROUTES)
async def test_text_parts_reach_a_string_template_joined(string_stack, route):
    client, fake, template = string_stack
    fields, messages = ROUTES[route]
    path = route if route.startswith("/") else "/v1/chat/completions"
    response = await client.post(path, data=orjson.dumps({"model": "default", **fields}))
    out = orjson.loads(await response.read())
    assert response.status == 200, out
    ids = out["tokens"] if path.endswith("tokenize") else list(fake.script.requests[-1].prompt_token_ids)
    assert ids == oracle(template, messages)
    assert "'type'" not in hf_tokenizer().decode(ids)


async def test_continue_final_message_parts_in_a_string_template(string_stack):
    client, _, template = string_stack
    body = {"model": "default", "messages": [{"role": "user", "content": "q"},
                                             {"role": "assistant", "content": PARTS}],
            "continue_final_message": True, "add_generation_prompt": False}
    out = orjson.loads(await (await client.post("/apply-template", data=orjson.dumps(body))).read())
    assert out["prompt"].endswith("<|im_start|>assistant\n" + JOINED)
