"""Unit tests: a checkpoint whose tokenizer_config.json names its chat templates ([{"name": "default", ...},
{"name": "tool_use", ...}], as Hermes 2 Pro and Command R ship them) renders a request with tools through its tool_use
template and one without through its default, as transformers' apply_chat_template picks them
(PreTrainedTokenizerBase.get_chat_template: tools not None and a "tool_use" entry) and vLLM renders with it.
Compared id for id with AutoTokenizer on a checkpoint folder with that config (fake scheduler)."""
import json
import os
import shutil

import orjson
import pytest
from tokenizers import Tokenizer

from gateway.fake_scheduler import FakeServing, fake_gateway
from tests.unit.test_gateway_template_inputs import _answer, _fields
from tests.unit.test_template_hf_sandbox import TINY

transformers = pytest.importorskip("transformers")
DEFAULT = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
           "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TOOL_USE = ("<|im_start|>system\nTools: {% for t in tools %}{{ t.function.name }} {% endfor %}<|im_end|>\n"
            + DEFAULT)
NAMED = [{"name": "default", "template": DEFAULT}, {"name": "tool_use", "template": TOOL_USE}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
MESSAGES = [{"role": "user", "content": "Weather in Oslo?"}]


@pytest.fixture
def checkpoint(tmp_path) -> str:
    folder = str(tmp_path / "ckpt")
    shutil.copytree(TINY, folder)
    path = os.path.join(folder, "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config["chat_template"] = NAMED
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return folder


@pytest.fixture
async def named_stack(checkpoint):
    """The gateway over a fake scheduler that answers Info as the scheduler does for that checkpoint."""
    fake = FakeServing(Tokenizer.from_file(os.path.join(TINY, "tokenizer.json")), max_context_len=4096,
                       template=DEFAULT)
    fake.script.reply = "ok"
    info = await fake.Info(None, None)
    with open(os.path.join(checkpoint, "tokenizer_config.json"), encoding="utf-8") as f:
        fake.Info = _answer(type(info)(**{**_fields(info), "tokenizer_config_json": f.read()}))
    async with fake_gateway(fake) as pair:
        yield pair


@pytest.mark.parametrize("tools", [TOOLS, None], ids=["tools", "no-tools"])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/tokenize", "/api/chat"])
async def test_tools_pick_the_tool_use_template(named_stack, checkpoint, path, tools):
    # Before, the default template rendered every request: the tools never reached the prompt.
    client, fake = named_stack
    body = {"model": "default", "messages": MESSAGES, "max_tokens": 1, "stream": False,
            **({"tools": tools} if tools else {})}
    response = await client.post(path, data=orjson.dumps(body))
    out = orjson.loads(await response.read())
    assert response.status == 200, out
    ids = out["tokens"] if path.endswith("tokenize") else list(fake.script.requests[-1].prompt_token_ids)
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    expected = tokenizer.apply_chat_template(MESSAGES, tools=tools, tokenize=True, add_generation_prompt=True)
    assert ids == list(expected["input_ids"] if hasattr(expected, "keys") else expected)
    assert ("Tools: get_weather" in tokenizer.decode(ids)) == bool(tools)


@pytest.mark.parametrize("served, tool_template", [(DEFAULT, TOOL_USE), ("{{ messages }}", "")],
                         ids=["named-list", "jinja-file-replaces-the-list"])
def test_the_tool_use_template_is_the_named_lists(served, tool_template):
    """The worker serves chat_template.jinja over the config's list (transformers reads the file over it, leaving no
    tool_use entry): then requests with tools render with the file's template too."""
    from gateway.model import ModelCard
    from proto import pb

    with open(os.path.join(TINY, "tokenizer.json"), "rb") as f:
        info = pb.InfoResponse(model_id="m", max_context_len=64, tokenizer_json=f.read(), chat_template=served,
                               tokenizer_config_json=json.dumps({"chat_template": NAMED}))
    assert ModelCard.from_info(info).tool_template_source == tool_template
