"""Unit tests (CPU): the chat template a checkpoint serves is the one transformers' AutoTokenizer loads from its folder
(vLLM renders with tokenizer.get_chat_template): chat_template.jinja replaces tokenizer_config.json's chat_template
(tokenization_utils_base._from_pretrained reads the file over the config's value); a named list's "default" is the
template without tools."""
import json
import os
import shutil

import pytest

from worker.model_card import load_model_card

transformers = pytest.importorskip("transformers")
TINY = os.path.join(os.path.dirname(__file__), "..", "..", "models", "tiny")
CONFIG_TEMPLATE = "{% for m in messages %}config:{{ m.content }}\n{% endfor %}"
FILE_TEMPLATE = "{% for m in messages %}file:{{ m.content }}\n{% endfor %}"
NAMED_TEMPLATE = "{% for m in messages %}named:{{ m.content }}\n{% endfor %}"


def checkpoint(tmp_path, config_template, files: dict) -> str:
    """The tiny checkpoint's config and tokenizer, tokenizer_config's chat_template `config_template` (None: no
    key), and the template files `files` (relative path -> text)."""
    folder = str(tmp_path / "ckpt")
    os.makedirs(folder)
    for name in ("config.json", "tokenizer.json", "generation_config.json"):
        shutil.copy(os.path.join(TINY, name), folder)
    with open(os.path.join(TINY, "tokenizer_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config.pop("chat_template", None)
    if config_template is not None:
        config["chat_template"] = config_template
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f)
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(folder, path)), exist_ok=True)
        with open(os.path.join(folder, path), "w", encoding="utf-8") as f:
            f.write(text)
    return folder


@pytest.mark.parametrize("config_template, files", [
    (CONFIG_TEMPLATE, {"chat_template.jinja": FILE_TEMPLATE}),
    ([{"name": "default", "template": CONFIG_TEMPLATE}], {"chat_template.jinja": FILE_TEMPLATE}),
    (CONFIG_TEMPLATE, {"chat_template.jinja": FILE_TEMPLATE, "chat_templates/tool_use.jinja": NAMED_TEMPLATE}),
    (CONFIG_TEMPLATE, {}),
    ([{"name": "tool_use", "template": NAMED_TEMPLATE}, {"name": "default", "template": CONFIG_TEMPLATE}], {}),
    (None, {"chat_template.jinja": FILE_TEMPLATE}),
], ids=["file-over-config", "file-over-named-list", "file-and-named-files", "config",
        "named-list", "file"])
def test_the_template_is_the_one_transformers_loads(tmp_path, config_template, files):
    # Before, tokenizer_config.json's chat_template won over chat_template.jinja, so a checkpoint
    # carrying both (a template fixed in its .jinja, the config's left as it was) rendered the old prompt.
    folder = checkpoint(tmp_path, config_template, files)
    expected = transformers.AutoTokenizer.from_pretrained(folder).get_chat_template()
    assert load_model_card(folder)["chat_template"] == expected
