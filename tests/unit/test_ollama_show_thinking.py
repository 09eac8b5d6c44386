"""Ollama's /api/show `thinking` (model.Thinking: the `think` values a model takes and the one an absent `think`
means; docs.ollama.com/api/chat: "Use /api/show to discover the supported values and default"): clients build their
think picker from thinking.values, check a configured level against it (and refuse to run when it is missing), and
read Qwen3.8's tiers there ("xhigh" among them, as Ollama's TestModelThinkingDiscovery lists them), so "xhigh" is taken
as `think` on /api/chat and /api/generate too."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway, read_template
from tests.unit.test_effort_tiers import QWEN38_TIERS

# A thinking mode switched by enable_thinking alone, no effort tiers (Qwen3.5's own template).
ON_OFF = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>"
          "{% if enable_thinking is defined and enable_thinking is false %}<think></think>{% else %}<think>{% endif %}")
NO_THINKING = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>"


async def _show(template: str) -> dict:
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=2048, template=template)) as (client, _):
        response = await client.post("/api/show", json={"model": "fake-model"})
        assert response.status == 200
        return await response.json()


@pytest.mark.parametrize("template, values", [(read_template(), [False, True, "low", "medium", "high", "xhigh"]),
                                              (QWEN38_TIERS, [False, True, "low", "medium", "xhigh"]),
                                              (ON_OFF, [False, True])],
                         ids=["shipped", "qwen38-tiers", "on-off"])
async def test_show_lists_the_think_values_the_template_takes(template, values):
    body = await _show(template)
    assert body["thinking"] == {"values": values, "default": True}
    assert "thinking" in body["capabilities"]


async def test_a_template_without_a_thinking_mode_has_no_thinking_metadata():
    body = await _show(NO_THINKING)
    assert "thinking" not in body and "thinking" not in body["capabilities"]


@pytest.mark.parametrize("path, body", [("/api/chat", {"messages": [{"role": "user", "content": "Hi"}]}),
                                        ("/api/generate", {"prompt": "Hi"})], ids=["chat", "generate"])
async def test_every_listed_value_is_a_think_the_routes_take(path, body):
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=2048, template=QWEN38_TIERS)) as (client, _):
        values = (await (await client.post("/api/show", json={"model": "fake-model"})).json())["thinking"]["values"]
        for value in values:
            response = await client.post(path, json={"model": "fake-model", "think": value,
                                                     "_debug_render_only": True, **body})
            prompt = (await response.json())["_debug_info"]["rendered_template"]
            assert response.status == 200, value
            # off closes the thinking; on is the template's default tier (xhigh there); a tier is that tier
            expected = {False: "<think>\n\n</think>", True: "Effort: xhigh", "low": "Effort: low",
                        "medium": "<|im_start|>user", "xhigh": "Effort: xhigh"}[value]
            assert expected in prompt and ("Effort" in prompt) == (value in (True, "low", "xhigh")), value
