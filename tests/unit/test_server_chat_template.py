"""SPARKINFER_CHAT_TEMPLATE: the server's chat template in place of the checkpoint's, a file or the template itself,
as vLLM's --chat-template (vllm/entrypoints/chat_utils.py load_chat_template) (fake scheduler)."""
import pytest

from gateway.config import parse_config
from gateway.fake_scheduler import FakeServing, build_tokenizer, fake_gateway

TEMPLATE = "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<bot>{% endif %}"


async def test_the_server_template_renders_every_chat():
    # vllm-project/vllm#12423 (a maintainer: 'set the chat template explicitly via --chat-template'), #2051,
    # tenstorrent/tt-inference-server#36 (a checkpoint without one). Before, the checkpoint's template was the only
    # one a deployment could serve: a request's chat_template needs the trust switch, and each client must send it.
    async with fake_gateway(FakeServing(build_tokenizer()), chat_template=TEMPLATE) as (client, _):
        response = await client.post("/v1/chat/completions", json={
            "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}],
            "max_tokens": 1, "return_prompt_text": True})
        assert response.status == 200, await response.text()
        assert (await response.json())["prompt_text"] == "<system>S\n<user>hi\n<bot>"
        tokenized = await (await client.post("/tokenize", json={"messages": [{"role": "user", "content": "x"}],
                                                                 "add_generation_prompt": False})).json()
        assert tokenized["count"] == len(build_tokenizer().encode("<user>x\n").ids)


def test_a_file_or_the_template_itself(tmp_path, monkeypatch):
    path = tmp_path / "template.jinja"
    path.write_text(TEMPLATE)
    monkeypatch.setenv("SPARKINFER_CHAT_TEMPLATE", str(path))
    assert parse_config([]).chat_template == TEMPLATE
    # As vLLM reads a value that is no file: the template, its \\n escapes decoded.
    monkeypatch.setenv("SPARKINFER_CHAT_TEMPLATE", "{% for m in messages %}{{ m.content }}\\n{% endfor %}")
    assert parse_config([]).chat_template == "{% for m in messages %}{{ m.content }}\n{% endfor %}"
    assert parse_config([]).printable()["chat_template"] == "set"


@pytest.mark.parametrize("value, says", [("templates/missing.jinja", "cannot be opened"),
                                         ("{% for m in messages %}", "does not compile")])
def test_a_template_that_cannot_be_read_stops_the_start(value, says, monkeypatch, capsys):
    monkeypatch.setenv("SPARKINFER_CHAT_TEMPLATE", value)
    with pytest.raises(SystemExit):
        parse_config([])
    err = capsys.readouterr().err
    assert "SPARKINFER_CHAT_TEMPLATE" in err and says in err
