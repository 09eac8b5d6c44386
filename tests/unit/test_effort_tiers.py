"""Ollama's `think` levels and LM Studio's `reasoning` are those APIs' own scales (low, medium, high, and Ollama's
max); each reaches the chat template as the nearest effort tier the template has. Qwen3.8's template has xhigh,
medium and low and raises on any other ('Unexpected reasoning effort high. Supported types are xhigh (default),
medium, and low.', ollama model/renderers/testdata/qwen38_chat_template.jinja), and Ollama's Qwen3.8 renderer sends
its "high" and "max" as xhigh (model/renderers/qwen35.go qwen38ReasoningInstructions). Here "high" reached that
template as "high": Ollama's documented think "high" was a 400, and LM Studio's reasoning "high", which /api/v1/models
lists as allowed, too."""
import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway, read_template

_SHIPPED = read_template()
_CHECK = _SHIPPED[_SHIPPED.index("{%- if thinking and reasoning_effort is defined"):
                  _SHIPPED.index("{%- set first_role")]
# The shipped template with Qwen3.8's effort tiers: xhigh (its default), medium and low, any other refused.
QWEN38_TIERS = _SHIPPED.replace(_CHECK, """{%- if thinking -%}
    {%- set effort = reasoning_effort|default('xhigh') -%}
    {%- if effort not in ('xhigh', 'medium', 'low') -%}
        {{- raise_exception('Unexpected reasoning effort ' ~ effort ~ '. Supported types are xhigh (default), '
                            'medium, and low.') -}}
    {%- elif effort != 'medium' -%}
        {%- set effort_text = 'Effort: ' ~ effort -%}
    {%- endif -%}
{%- endif -%}
""")
HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture
async def qwen38():
    async with fake_gateway(FakeServing(build_tokenizer(), max_context_len=2048, template=QWEN38_TIERS)) as pair:
        yield pair


def _system_line(prompt: str) -> str:
    return prompt.split("<|im_start|>system\n", 1)[1].split("<|im_end|>", 1)[0] if "system\n" in prompt else ""


@pytest.mark.parametrize("think, effort", [("low", "Effort: low"), ("medium", ""), ("high", "Effort: xhigh"),
                                           ("max", "Effort: xhigh")])
@pytest.mark.parametrize("path", ["/api/chat", "/api/generate"])
async def test_ollama_think_levels_reach_the_templates_nearest_tier(qwen38, path, think, effort):
    client, _ = qwen38
    body = {"model": "fake-model", "think": think, "_debug_render_only": True,
            **({"messages": HI} if path == "/api/chat" else {"prompt": "Hi"})}
    response = await client.post(path, json=body)
    assert response.status == 200, await response.text()
    assert _system_line((await response.json())["_debug_info"]["rendered_template"]) == effort


@pytest.mark.parametrize("setting, prompt_tokens_like", [("high", "max"), ("low", "low")])
async def test_lm_studio_reasoning_levels_reach_the_templates_nearest_tier(qwen38, setting, prompt_tokens_like):
    client, fake = qwen38
    models = await (await client.get("/api/v1/models")).json()
    assert "high" in models["models"][0]["capabilities"]["reasoning"]["allowed_options"]
    response = await client.post("/api/v1/chat", json={"model": "fake-model", "input": "Hi", "reasoning": setting})
    assert response.status == 200, await response.text()
    prompt = fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)
    ollama = await (await client.post("/api/chat", json={"model": "fake-model", "messages": HI, "_debug_render_only":
                                                         True, "think": prompt_tokens_like})).json()
    assert prompt == ollama["_debug_info"]["rendered_template"]


async def test_a_template_with_every_tier_gets_the_level_itself(stack):
    client, _ = stack
    answer = await (await client.post("/api/chat", json={"model": "default", "messages": HI, "think": "high",
                                                         "_debug_render_only": True})).json()
    assert "Reasoning effort is set to high." in answer["_debug_info"]["rendered_template"]
