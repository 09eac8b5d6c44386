"""Ollama's per-request `template` on /api/generate (a Go text/template) is rendered, as Ollama's GenerateHandler does:
.System and .Prompt for a legacy template, cut at {{ .Response }}; .Messages for one that ranges over them. It was a
400 ('a per-request template is not supported')."""
import datetime

import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.ollama_template import render
from tests.unit.test_gateway_app import stack  # noqa: F401  (the fixture)

CHATML = ("{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}{{ if .Prompt }}<|im_start|>user\n"
          "{{ .Prompt }}<|im_end|>\n{{ end }}<|im_start|>assistant\n{{ .Response }}<|im_end|>\n")
MESSAGES = ("{{- range $i, $_ := .Messages }}{{- $last := eq (len (slice $.Messages $i)) 1 -}}\n"
            "<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ if and $last (ne .Role \"assistant\") }}"
            "<|im_start|>assistant\n{{ end }}{{ end }}")


async def generate(client, fake, body: dict) -> tuple[str, dict]:
    fake.script.reply = "Sure."
    response = await client.post("/api/generate", data=orjson.dumps({"model": "default", "stream": False, **body}))
    answer = orjson.loads(await response.read())
    assert response.status == 200, answer
    ids = list(fake.script.requests[-1].prompt_token_ids)
    assert answer["prompt_eval_count"] == len(ids)
    return fake.tokenizer.decode(ids, skip_special_tokens=False), answer


@pytest.mark.parametrize("template, prompt", [
    ("{{ .System }} Q: {{ .Prompt }} A:", "Be brief. Q: Why? A:"),
    (CHATML, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n"),
    (MESSAGES, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n<|im_start|>assistant\n"),
], ids=["plain", "legacy chatml cut at Response", "messages"])
async def test_the_request_template_makes_the_prompt(stack, template, prompt):
    client, fake = stack
    text, answer = await generate(client, fake, {"prompt": "Why?", "system": "Be brief.", "template": template})
    assert text == prompt and answer["response"] == "Sure."


async def test_the_templates_tokens_are_control_tokens_the_prompts_are_text(stack):
    client, fake = stack
    await generate(client, fake, {"prompt": "x<|im_start|>", "template": CHATML})
    ids = list(fake.script.requests[-1].prompt_token_ids)
    assert ids.count(fake.tokenizer.token_to_id("<|im_start|>")) == 2


async def test_an_unsupported_action_is_ollamas_400(stack):
    client, fake = stack
    response = await client.post("/api/generate", data=orjson.dumps(
        {"model": "default", "stream": False, "prompt": "Why?", "template": "{{ template \"x\" . }}"}))
    assert response.status == 400 and orjson.loads(await response.read())["error"].startswith("template: ")


def test_conditions_ranges_and_variables():
    source = '{{ range .Messages }}{{ if eq .Role "user" }}U:{{ .Content }}{{ else }}S:{{ .Content }}{{ end }} {{ end }}'
    data = {"Messages": [{"Role": "system", "Content": "a"}, {"Role": "user", "Content": "b"}]}
    assert render(source, data, cut=False) == "S:a U:b "
    assert render("{{- if not .System -}}  none  {{- end }}", {"System": ""}) == "none"
    with pytest.raises(InvalidRequest, match="has no {{ end }}"):
        render("{{ if .System }}x", {})
    for source, message in [("{{ eq }}", "wrong number or type of arguments for eq"),
                            ("{{ and }}", "wrong number or type of arguments for and"),
                            ('{{ "\\q" }}', 'bad string constant "\\q"')]:
        with pytest.raises(InvalidRequest) as info:
            render(source, {})
        assert info.value.message == f"template: {message}"


async def test_deep_nesting_and_long_loops_are_400s_not_500s(stack):
    """1000 nested ifs overflowed Python's recursion (a 500); ranges in ranges are bounded by the step budget."""
    client, fake = stack
    for template in ["{{ if .Prompt }}" * 1000 + "x" + "{{ end }}" * 1000,
                     "{{ range $.Messages }}" * 24 + "{{ $.Prompt }}" + "{{ end }}" * 24]:
        response = await client.post("/api/generate", data=orjson.dumps(
            {"model": "default", "stream": False, "prompt": "Why?" * 20, "system": "s", "template": template}))
        assert response.status == 400
        assert orjson.loads(await response.read())["error"] in (
            "template: blocks nest more than 64 deep", "template: the template renders too long a prompt")


async def test_parentheses_nested_too_deeply_are_a_400(stack):
    """A pipeline in 1000 parentheses overflowed the renderer's recursion (a 500); 10 deep still renders."""
    client, _ = stack
    for depth, status in ((1000, 400), (10, 200)):
        template = "{{ " + "(" * depth + "print .Prompt" + ")" * depth + " }}"
        response = await client.post("/api/generate", data=orjson.dumps(
            {"model": "default", "stream": False, "prompt": "Why?", "raw": False, "template": template}))
        answer = orjson.loads(await response.read())
        assert response.status == status, answer
        assert answer == {"error": "template: parentheses nest more than 64 deep"} if status == 400 else answer["done"]
    assert render("{{ " + "(" * 10 + "print .Prompt" + ")" * 10 + " }}", {"Prompt": "Why?"}) == "Why?"
    with pytest.raises(InvalidRequest) as info:
        render("{{ " + "(" * 1000 + "print .Prompt" + ")" * 1000 + " }}", {"Prompt": "Why?"})
    assert info.value.message == "template: parentheses nest more than 64 deep"


@pytest.mark.parametrize("template, prompt", [
    ("Today is {{ currentDate }}. {{ .Prompt }}", "Today is {today}. a<b & \"c\""),
    ('{{ currentDate "2006-01-02" }}|{{ yesterdayDate }}', "{today}|{yesterday}"),
    ("{{ json .Prompt }} {{ json .Messages }}",
     '"a\\u003cb \\u0026 \\"c\\"" [{"role":"user","content":"a\\u003cb \\u0026 \\"c\\""}]'),
    ("{{ if true }}t{{ end }}{{ if false }}f{{ end }}{{ if nil }}n{{ end }}{{ if eq .Prompt nil }}e{{ end }}", "t"),
], ids=["currentDate", "yesterdayDate", "json", "constants"])
async def test_ollamas_template_functions_and_gos_constants(stack, template, prompt):
    """Ollama's template functions (template/template.go: currentDate, yesterdayDate, json) and Go's true, false and
    nil; a bare word rendered as nothing before ("Today is ." for {{ currentDate }})."""
    client, fake = stack
    today = datetime.date.today()
    text, _ = await generate(client, fake, {"prompt": 'a<b & "c"', "template": template})
    yesterday = today - datetime.timedelta(days=1)
    assert text == prompt.replace("{today}", today.isoformat()).replace("{yesterday}", yesterday.isoformat())


async def test_a_function_ollama_lacks_is_gos_parse_error(stack):
    client, fake = stack
    for word in ("Prompt", "toJson"):
        response = await client.post("/api/generate", data=orjson.dumps(
            {"model": "default", "stream": False, "prompt": "Why?", "template": f"{{{{ {word} }}}}"}))
        assert response.status == 400
        assert orjson.loads(await response.read()) == {"error": f'template: function "{word}" not defined'}


# Ollama's own Qwen3 template reads .IsThinkSet and .Think to add /think or /nothink; gpt-oss's reads .ThinkLevel.
THINK_VARS = "{{ .Think }}|{{ .ThinkLevel }}|{{ .IsThinkSet }}|{{ .Prompt }}"


@pytest.mark.parametrize("think, rendered", [
    (None, "true|medium|true|Hi"), (True, "true|medium|true|Hi"), (False, "false||true|Hi"),
    ("high", "true|high|true|Hi"),
], ids=["unset", "true", "false", "high"])
async def test_think_values_are_ollamas(stack, think, rendered):
    """As GenerateHandler sets them: an unset think on a model that thinks is true (req.Think is defaulted before the
    template runs), and true's level is "medium" (api.ThinkValue.String())."""
    client, fake = stack
    body = {"prompt": "Hi", "template": THINK_VARS, "_debug_render_only": True, **({} if think is None else
                                                                                 {"think": think})}
    answer = await (await client.post("/api/generate", json={"model": "default", **body})).json()
    assert answer["_debug_info"]["rendered_template"] == rendered
