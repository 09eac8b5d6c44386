"""Ollama's per-request `template` (Go text/template): {{ break }} and {{ continue }} inside a range end the loop or
its pass, as Go (1.18+) runs them. Ollama's own gemma-instruct, command-r, falcon-instruct, magicoder and
solar-instruct templates skip the system messages in their range with {{ continue }}; such a template was a 400
'template: function "continue" not defined'."""
import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.ollama_template import render
from tests.unit.test_gateway_app import stack  # noqa: F401  (the fixture)

# The shape of Ollama's gemma-instruct template: the system prompt goes before the first user turn, and the system
# message itself is skipped in the range.
SKIP_SYSTEM = ('{{- range $i, $_ := .Messages }}{{- if eq .Role "system" }}{{- continue }}{{- end }}'
               '<{{ .Role }}>{{ if and $.System (eq $i 1) }}{{ $.System }}\n{{ end }}{{ .Content }}</{{ .Role }}>'
               '{{- end }}<assistant>')
MESSAGES = [{"Role": "system", "Content": "Be brief."}, {"Role": "user", "Content": "Why?"},
            {"Role": "assistant", "Content": "Sky."}, {"Role": "user", "Content": "Really?"}]


async def test_a_template_that_skips_the_system_message_makes_the_prompt(stack):
    client, fake = stack
    fake.script.reply = "Sure."
    body = {"model": "default", "stream": False, "prompt": "Why?", "system": "Be brief.", "template": SKIP_SYSTEM}
    response = await client.post("/api/generate", data=orjson.dumps(body))
    assert response.status == 200, await response.read()
    ids = list(fake.script.requests[-1].prompt_token_ids)
    assert fake.tokenizer.decode(ids, skip_special_tokens=False) == "<user>Be brief.\nWhy?</user><assistant>"


@pytest.mark.parametrize("source, rendered", [
    ('{{ range .Messages }}{{ if eq .Role "system" }}{{ continue }}{{ end }}{{ .Content }};{{ end }}',
     "Why?;Sky.;Really?;"),
    ('{{ range .Messages }}{{ if eq .Role "assistant" }}{{ break }}{{ end }}{{ .Content }};{{ end }}',
     "Be brief.;Why?;"),
    ('{{ range .Messages }}{{ range .Messages }}{{ break }}{{ end }}{{ .Content }};{{ end }}',
     "Be brief.;Why?;Sky.;Really?;"),
    ('{{ $n := 0 }}{{ range $i, $_ := .Messages }}{{ $n = $i }}{{ if eq $i 1 }}{{ break }}{{ end }}{{ end }}{{ $n }}',
     "1"),
], ids=["continue", "break", "break ends the inner range", "break keeps what was set"])
def test_break_and_continue_end_the_range_or_its_pass(source, rendered):
    data = {"Messages": [{**m, "Messages": [1, 2]} for m in MESSAGES]}
    assert render(source, data, cut=False) == rendered


@pytest.mark.parametrize("word", ["break", "continue"])
def test_break_or_continue_outside_a_range_is_gos_parse_error(word):
    with pytest.raises(InvalidRequest) as info:
        render(f"{{{{ if .System }}}}{{{{ {word} }}}}{{{{ end }}}}", {"System": "s"})
    assert info.value.message == f"template: {{{{{word}}}}} outside {{{{range}}}}"
