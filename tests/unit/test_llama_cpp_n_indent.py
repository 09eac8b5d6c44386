"""llama.cpp's n_indent: "the minimum line indentation for the generated text in number of whitespace characters.
Useful for code completion tasks" (tools/server/README.md, /completion and /infill options; llama.cpp PR #9929). A line
after the first that starts with fewer spaces or tabs ends the output before its first other character, stop_type
"limit" (server-context.cpp process_token erases generated_text from there). llama.vscode and llama.vim send it with
every /infill request so that a completion stays in the cursor's scope; it was ignored here ("n_indent ... is not
applied"), and the completion ran on into the enclosing scope."""
import json

import pytest

from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway
from gateway.indent_limit import IndentLimit

REPLY = "x = 1\n    y = 2\n    z = 3\nprint(x)\n    w = 4"


@pytest.mark.parametrize("pieces, n, kept", [
    (["x = 1\n", "    y", "\n  z"], 4, ["x = 1\n", "    y", "\n  "]),     # a 2-space line under 4: cut before its z
    (["a\n\t\tb\n\tc"], 2, ["a\n\t\tb\n\t"]),                          # tabs count one each
    (["a\n", "  \n  b\n\n"], 2, ["a\n", "  \n  b\n"]),                 # an empty line stops it, as llama.cpp's
    (["first line at 0\n", "  ok"], 2, ["first line at 0\n", "  ok"]),  # the first line is not checked
    (["a\nb"], 0, ["a\nb"]),                                            # 0: off
])
def test_the_first_under_indented_line_is_cut_before_its_text(pieces, n, kept):
    limit = IndentLimit(n)
    assert [limit.push(piece) for piece in pieces] == kept


@pytest.fixture
async def client():
    fake = FakeServing(build_tokenizer())
    fake.script.reply = REPLY
    async with fake_gateway(fake) as (client, _):
        yield client


async def test_completion_stops_at_the_line_that_leaves_the_scope(client):
    response = await client.post("/completion", json={"prompt": "def f():\n", "n_indent": 4})
    body = await response.json()
    assert response.status == 200, body
    assert (body["content"], body["stop_type"]) == ("x = 1\n    y = 2\n    z = 3\n", "limit")
    assert body["tokens_predicted"] < len(build_tokenizer().encode(REPLY).ids)
    whole = await (await client.post("/completion", json={"prompt": "def f():\n"})).json()
    assert (whole["content"], whole["stop_type"]) == (REPLY, "eos")


async def test_streamed_too_and_on_the_openai_completions_route(client):
    response = await client.post("/completion", json={"prompt": "def f():\n", "n_indent": 4, "stream": True})
    events = [json.loads(line[6:]) for line in (await response.text()).splitlines() if line.startswith("data: ")]
    assert "".join(event["content"] for event in events) == "x = 1\n    y = 2\n    z = 3\n"
    assert events[-1]["stop"] is True and events[-1]["stop_type"] == "limit"
    body = await (await client.post("/v1/completions", json={"prompt": "def f():\n", "n_indent": 4,
                                                                  "max_tokens": 64})).json()
    assert body["choices"][0]["text"] == "x = 1\n    y = 2\n    z = 3\n"
    assert body["choices"][0]["finish_reason"] == "length"
