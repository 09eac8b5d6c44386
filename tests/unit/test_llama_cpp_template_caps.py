"""GET /props carries chat_template_caps, as llama.cpp's server reports them (tools/server get_props; the probes of
common/jinja/caps.cpp caps_get): clients of llama-server read chat_template_caps.supports_tools / supports_tool_calls
to decide whether to send tools at all, and supports_preserve_reasoning whether to send earlier turns' reasoning back;
without the key they took the model for one that cannot call tools."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway, read_template
from gateway.template_caps import template_caps

ALL_BUT_TYPED = {"supports_object_arguments": True, "supports_parallel_tool_calls": True,
                 "supports_preserve_reasoning": True, "supports_string_content": True,
                 "supports_system_role": True, "supports_tool_calls": True, "supports_tools": True,
                 "supports_typed_content": False}
PLAIN = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
NO_SYSTEM = "{% for m in messages %}{% if m.role != 'system' %}{{ m.content }}{% endif %}{% endfor %}"
PARTS = "{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}"
# Tool calls whose arguments are written as the JSON text a client sent; earlier turns' reasoning dropped.
STRING_ARGS = ("{% for t in tools %}{{ t | tojson }}{% endfor %}{% for m in messages %}{{ m.content }}"
               "{% for c in m.tool_calls or [] %}{{ c.function.name }}{{ c.function.arguments }}{% endfor %}"
               "{% if m.reasoning_content and loop.last %}{{ m.reasoning_content }}{% endif %}{% endfor %}")


async def test_props_reports_the_served_templates_caps():
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=256)) as (client, serving):
        response = await client.get("/props")
        body = await response.json()
    assert response.status == 200 and body["chat_template"] == serving.template
    assert body["chat_template_caps"] == ALL_BUT_TYPED


@pytest.mark.parametrize("source, expected", [
    (PLAIN, {"supports_tools": False, "supports_tool_calls": False, "supports_parallel_tool_calls": False,
             "supports_object_arguments": False, "supports_system_role": True, "supports_typed_content": False,
             "supports_preserve_reasoning": False}),
    (NO_SYSTEM, {"supports_system_role": False}),
    (PARTS, {"supports_typed_content": True}),
    (STRING_ARGS, {"supports_tools": True, "supports_tool_calls": True, "supports_parallel_tool_calls": True,
                   "supports_object_arguments": False, "supports_preserve_reasoning": False}),
], ids=["plain", "no-system", "typed-parts", "string-arguments"])
def test_each_cap_follows_what_the_template_reads(source, expected):
    caps = template_caps(source)
    assert {key: caps[key] for key in expected} == expected


def test_the_shipped_qwen_template_takes_every_shape_but_typed_parts():
    assert template_caps(read_template()) == ALL_BUT_TYPED
