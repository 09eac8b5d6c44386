"""Ollama's per-request `template` (Go text/template): the rest of Go's control grammar (text/template docs, Actions):
{{ range x }} T1 {{ else }} T0 {{ end }} runs T0 for an empty x, a condition may declare a variable
({{ if $n := len .Messages }}, {{ with $m := index .Messages 0 }}) that lives to the chain's end, and a with chains
{{ else with }} (Go 1.23). Each was a 400 ('range ... else is not supported', 'unsupported action')."""
import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.ollama_template import render
from tests.unit.test_gateway_app import stack  # noqa: F401  (the fixture)

MESSAGES = [{"Role": "system", "Content": "S"}, {"Role": "user", "Content": "Q"}]


async def test_a_template_with_range_else_makes_the_prompt(stack):
    client, fake = stack
    fake.script.reply = "Sure."
    template = "{{ range .Tools }}T{{ else }}no tools. {{ end }}{{ .Prompt }}"
    body = {"model": "default", "stream": False, "prompt": "Why?", "template": template}
    response = await client.post("/api/generate", data=orjson.dumps(body))
    assert response.status == 200, await response.read()
    ids = list(fake.script.requests[-1].prompt_token_ids)
    assert fake.tokenizer.decode(ids, skip_special_tokens=False) == "no tools. Why?"


@pytest.mark.parametrize("source, rendered", [
    ("{{ range .Empty }}x{{ else }}none{{ end }}|{{ range .Messages }}{{ .Role }}{{ else }}none{{ end }}",
     "none|systemuser"),
    ("{{ range $i, $m := .Empty }}x{{ else }}{{ len .Messages }}{{ end }}", "2"),
    ("{{ if $n := len .Messages }}{{ $n }} messages{{ else }}none{{ end }}", "2 messages"),
    ("{{ if $n := len .Empty }}{{ $n }}{{ else }}{{ $n }} messages{{ end }}", "0 messages"),
    ("{{ with $m := index .Messages 1 }}{{ $m.Role }}:{{ .Content }}{{ end }}", "user:Q"),
    ("{{ with .Nope }}a{{ else with .Messages }}{{ len . }}{{ else }}c{{ end }}", "2"),
    ("{{ with .Nope }}a{{ else if .Messages }}{{ len . }}{{ end }}", "2"),
], ids=["range else", "range else keeps dot", "if declares", "declared in else too", "with declares", "else with",
        "with else if"])
def test_gos_control_structures(source, rendered):
    assert render(source, {"Messages": MESSAGES, "Empty": []}, cut=False) == rendered


def test_a_condition_variable_ends_with_its_chain():
    with pytest.raises(InvalidRequest) as info:
        render("{{ if $n := 1 }}{{ end }}{{ $n }}", {}, cut=False)
    assert info.value.message == "template: undefined variable $n"
