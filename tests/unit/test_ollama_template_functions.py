"""Ollama's per-request `template` (Go text/template) may call Go's builtin functions lt, le, gt, ge, index, print,
printf and println, as Ollama executes it (text/template funcs.go builtins). Ollama's alpaca, vicuna and llama2-chat
templates join two system messages with printf "%s\\n\\n%s", and Mistral's templates place the tools with
le (len (slice $.Messages $i)) 2; each was a 400 "template: unsupported function 'le'"."""
import time

import orjson
import pytest

from gateway.errors import InvalidRequest
from gateway.ollama_template import render
from tests.unit.test_gateway_app import stack  # noqa: F401  (the fixture)

MESSAGES = [{"Role": "system", "Content": "A"}, {"Role": "system", "Content": "B"}, {"Role": "user", "Content": "Q"}]
# The shape of Mistral's templates: the last user turn (or the one before a final answer) gets the system prompt.
MISTRAL = ('{{- range $i, $_ := .Messages }}{{- if eq .Role "user" }}[INST] '
           '{{- if and $.System (le (len (slice $.Messages $i)) 2) }}{{ $.System }}\n\n{{ end }}{{ .Content }}[/INST]'
           '{{- end }}{{- end }}')


async def test_a_template_comparing_lengths_makes_the_prompt(stack):
    client, fake = stack
    fake.script.reply = "Sure."
    body = {"model": "default", "stream": False, "prompt": "Why?", "system": "Be brief.", "template": MISTRAL}
    response = await client.post("/api/generate", data=orjson.dumps(body))
    assert response.status == 200, await response.read()
    ids = list(fake.script.requests[-1].prompt_token_ids)
    assert fake.tokenizer.decode(ids, skip_special_tokens=False) == "[INST]Be brief.\n\nWhy?[/INST]"


@pytest.mark.parametrize("source, rendered", [
    ('{{ $s := "" }}{{ range .Messages }}{{ if eq .Role "system" }}{{ if not $s }}{{ $s = .Content }}{{ else }}'
     '{{ $s = printf "%s\\n\\n%s" $s .Content }}{{ end }}{{ end }}{{ end }}{{ $s }}', "A\n\nB"),
    ('{{ lt 1 2 }} {{ le 2 2 }} {{ gt "b" "a" }} {{ ge 1.5 2.5 }}', "true true true false"),
    ('{{ (index .Messages 2).Content }}|{{ index .Messages 0 "Role" }}|{{ index . "Nope" }}|', "Q|system||"),
    ('{{ print 1 2 "x" 3 }}|{{ println "a" 1 }}|', "1 2x3|a 1\n|"),
    ('{{ printf "%d items, %5.2f, %-3s|%q %t %v %%" 3 1.5 "ab" "q" true 2 }}', '3 items,  1.50, ab |"q" true 2 %'),
    ('{{ printf "%s %s" "a" }}|{{ printf "%d" "x" }}|{{ printf "%s" "a" 2 }}',
     "a %!s(MISSING)|%!d(string=x)|a%!(EXTRA int=2)"),
    # fmt's parsenum stops reading a width or precision past 1e6 (tooLarge): %!(NOVERB), the rest of the format
    # dropped; they made strings of 100 MB here.
    ('{{ printf "a%99999999db" 1 }}|{{ printf "%.99999999f x" 1 }}|{{ len (printf "%9999999d" 1) }}',
     "a%!(NOVERB)%!(EXTRA int=1)|%!(NOVERB)%!(EXTRA int=1)|9999999"),
    # Ollama's toTypeScriptType (template/template.go funcs): "any" for a value that is no tool property; it was Go's
    # 'function "toTypeScriptType" not defined'.
    ('{{ toTypeScriptType (index .Messages 2) }}|{{ toTypeScriptType .Nope }}|{{ toTypeScriptType 1 }}', "any|any|any"),
    # A pipeline: each stage's result is the next one's last argument (text/template's "pipeline"); it was the 400
    # 'unsupported action'.
    ('{{ (index .Messages 2).Content | printf "%s!" | printf "<%s>" }}|{{ if .Messages | len | eq 3 }}3{{ end }}|'
     '{{ $n := .Messages | len }}{{ $n }}|{{ (.Messages | len) }}|{{ printf "a|b" }}', "<Q!>|3|3|3|a|b"),
], ids=["printf joins systems", "comparisons", "index", "print and println", "printf verbs", "printf mismatches",
        "printf width past fmt's bound", "toTypeScriptType", "pipelines"])
def test_gos_builtin_functions(source, rendered):
    assert render(source, {"Messages": MESSAGES}, cut=False) == rendered


@pytest.mark.parametrize("source, message", [
    ('{{ lt 1 "a" }}', "error calling lt: incompatible types for comparison"),
    ("{{ ge 1 1.5 }}", "error calling ge: incompatible types for comparison"),
    ("{{ index .Messages 5 }}", "error calling index: index out of range: 5"),
    ('{{ printf "%x" 1 }}', "error calling printf: the verb %x is not supported"),
    ("{{ .Messages | }}", "missing command in {{ .Messages | }}"),
    # text/template's lexer: a {{ no }} closes (Ollama's 500 "template: :1: unclosed action"); it was read as text
    # and the request answered with the markup in its prompt.
    ("a {{ .Messages }} b {{ .Messages", "unclosed action"),
    ("{{- if .Messages }}x{{ end", "unclosed action"),
])
def test_what_go_refuses_is_a_400(source, message):
    with pytest.raises(InvalidRequest) as info:
        render(source, {"Messages": MESSAGES}, cut=False)
    assert info.value.message == f"template: {message}"


async def test_a_pipeline_too_long_to_render_is_a_400_and_the_deepest_allowed_renders(stack):
    """A pipeline runs here as nested calls, so {{ .Prompt | print | print ... }} with 5000 stages ran the renderer out
    of stack: a 500 RecursionError. Pipelines and parentheses together may nest 128 deep (a 400 past it); the deepest
    allowed, inside 63 nested blocks, still renders."""
    client, fake = stack
    fake.script.reply = "ok"
    deep = "{{ if true }}" * 63 + "{{ print (.Prompt" + " | print" * 120 + ") }}" + "{{ end }}" * 63
    for stages, status in [(5000, 400), (0, 200)]:
        source = "{{ .Prompt" + " | print" * stages + " }}" if stages else deep
        body = {"model": "default", "stream": False, "prompt": "Why?", "template": source}
        response = await client.post("/api/generate", data=orjson.dumps(body))
        answer = orjson.loads(await response.read())
        assert response.status == status, answer
        if status == 400:
            assert answer["error"].startswith("template: max expression depth exceeded"), answer
        else:
            ids = list(fake.script.requests[-1].prompt_token_ids)
            assert fake.tokenizer.decode(ids, skip_special_tokens=False) == "Why?"


def test_an_unclosed_template_is_refused_in_linear_time():
    """20 KB of "{{" held the gateway's event loop 7 s (a lazy regex scanned for }} from every {{): the parse is one
    pass, so 200 KB of it is the 400 at once, and a {{ closed at the very end still parses."""
    started = time.perf_counter()
    with pytest.raises(InvalidRequest) as info:
        render("{{" * 100_000, {"Messages": MESSAGES}, cut=False)
    assert info.value.message == "template: unclosed action"
    assert time.perf_counter() - started < 1.0
    assert render("x" * 100_000 + "{{- if .Messages -}} y {{- end }}", {"Messages": MESSAGES}, cut=False)[-2:] == "xy"
