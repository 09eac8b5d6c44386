"""Ollama's per-request `template` (Go text/template): a variable set with `=` inside range / if is the one declared
outside it, as Go's executor keeps one variable stack (text/template exec.go setVar); `:=` declares a new one that
ends with its block. Ollama's own prompt templates (alpaca, vicuna, llama2-chat, starcoder2-instruct) gather the
system prompt so: `{{ $system := "" }}{{ range .Messages }}...{{ $system = .Content }}...`. Each range pass copied
the variables, so that set was lost and the system prompt silently left out of the prompt."""
import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.ollama_template import render
from tests.unit.test_gateway_app import stack  # noqa: F401  (the fixture)

# The shape of Ollama's alpaca / vicuna templates: the system prompt is kept in a variable and written before the
# next user turn.
GATHER_SYSTEM = ('{{- $system := "" }}{{- range .Messages }}'
                 '{{- if eq .Role "system" }}{{ $system = .Content }}'
                 '{{- else if eq .Role "user" }}{{- if $system }}[{{ $system }}] {{ $system = "" }}{{- end }}'
                 'USER: {{ .Content }}{{ end }}{{- end }} ASSISTANT:')
MESSAGES = [{"Role": "system", "Content": "Be brief."}, {"Role": "user", "Content": "Why?"},
            {"Role": "assistant", "Content": "Sky."}, {"Role": "user", "Content": "Really?"}]


async def test_the_system_prompt_a_range_gathers_reaches_the_prompt(stack):
    client, fake = stack
    fake.script.reply = "Sure."
    body = {"model": "default", "stream": False, "prompt": "Why?", "system": "Be brief.", "template": GATHER_SYSTEM}
    response = await client.post("/api/generate", data=orjson.dumps(body))
    assert response.status == 200, await response.read()
    ids = list(fake.script.requests[-1].prompt_token_ids)
    assert fake.tokenizer.decode(ids, skip_special_tokens=False) == "[Be brief.] USER: Why? ASSISTANT:"


@pytest.mark.parametrize("source, rendered", [
    (GATHER_SYSTEM, "[Be brief.] USER: Why?USER: Really? ASSISTANT:"),
    ('{{ $last := "" }}{{ range .Messages }}{{ $last = .Role }}{{ end }}{{ $last }}', "user"),
    ('{{ $n := 0 }}{{ range $i, $m := .Messages }}{{ if eq $m.Role "user" }}{{ $n = $i }}{{ end }}{{ end }}{{ $n }}',
     "3"),
    ('{{ $x := "a" }}{{ with .Messages }}{{ $x = "b" }}{{ end }}{{ $x }}', "b"),
], ids=["alpaca-style system", "set in range", "set in if in range", "set in with"])
def test_a_set_inside_a_block_changes_the_variable_outside(source, rendered):
    assert render(source, {"Messages": MESSAGES}, cut=False) == rendered


@pytest.mark.parametrize("source, rendered", [
    ('{{ $x := "a" }}{{ if true }}{{ $x := "b" }}{{ $x }}{{ end }}{{ $x }}', "ba"),
    ('{{ $x := "a" }}{{ range .Messages }}{{ $x := .Role }}{{ end }}{{ $x }}', "a"),
    ('{{ range .Messages }}{{ $r := .Role }}{{ $r }},{{ end }}', "system,user,assistant,user,"),
], ids=["shadow in if", "shadow in range", "declared each pass"])
def test_a_declaration_inside_a_block_ends_with_it(source, rendered):
    assert render(source, {"Messages": MESSAGES}, cut=False) == rendered


def test_setting_an_undeclared_variable_is_a_400():
    with pytest.raises(InvalidRequest) as info:
        render('{{ range .Messages }}{{ $x := 1 }}{{ end }}{{ $x = 2 }}', {"Messages": MESSAGES}, cut=False)
    assert info.value.message == "template: undefined variable $x"
