"""llama.cpp's per-request reasoning_format on chat (tools/server/server-task.cpp params_from_json_cmpl): "none" leaves
the thinking in content as written, from the <think> the prompt opened (llama.cpp's web UI sends it for "disable
reasoning parsing"; Open WebUI and llama-swap fold that block, and lost it without the opening tag: llama.cpp #23320),
"deepseek-legacy" also fills reasoning_content when not streamed, "auto" / "deepseek" split as without the field; any
other name is a 400. Before, the field was ignored (logged as unknown) and the thinking always came apart."""
import json

import pytest

REPLY = "Let me think.\n</think>\n\nHello world"
PATHS = ["/v1/chat/completions", "/api/v0/chat/completions"]
WRITTEN = "<think>\nLet me think.\n</think>\n\nHello world"
USER = [{"role": "user", "content": "hi"}]


async def _whole(client, path: str, extra: dict) -> dict:
    response = await client.post(path, json={"messages": USER, **extra})
    assert response.status == 200, await response.text()
    return (await response.json())["choices"][0]["message"]


async def _streamed(client, path: str, extra: dict) -> tuple[str, str]:
    response = await client.post(path, json={"messages": USER, "stream": True, **extra})
    assert response.status == 200, await response.text()
    reasoning, content = "", ""
    for line in (await response.text()).splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                reasoning += choice["delta"].get("reasoning_content") or ""
                content += choice["delta"].get("content") or ""
    return reasoning, content


@pytest.mark.parametrize("path", PATHS)
async def test_none_leaves_the_thinking_in_the_content_with_its_tags(stack, path):
    client, _ = stack
    message = await _whole(client, path, {"reasoning_format": "none"})
    assert message["content"] == WRITTEN and "reasoning_content" not in message
    assert await _streamed(client, path, {"reasoning_format": "none"}) == ("", WRITTEN)


@pytest.mark.parametrize("path", PATHS)
async def test_deepseek_legacy_keeps_the_tags_and_fills_reasoning_content(stack, path):
    client, _ = stack
    message = await _whole(client, path, {"reasoning_format": "deepseek-legacy"})
    assert (message["content"], message["reasoning_content"]) == (WRITTEN, "Let me think.\n")
    # Streamed, llama.cpp sends the thinking in the content deltas only (its reasoning_in_content).
    assert await _streamed(client, path, {"reasoning_format": "deepseek-legacy"}) == ("", WRITTEN)


@pytest.mark.parametrize("fmt", ["auto", "deepseek", None])
async def test_auto_and_deepseek_split_the_thinking(stack, fmt):
    client, _ = stack
    message = await _whole(client, "/v1/chat/completions", {"reasoning_format": fmt})
    assert (message["content"], message["reasoning_content"]) == ("Hello world", "Let me think.\n")
    assert await _streamed(client, "/v1/chat/completions", {"reasoning_format": fmt}) == ("Let me think.\n",
                                                                                          "Hello world")


async def test_thinking_off_has_no_tag_to_add(stack):
    client, fake = stack
    fake.script.reply = "Hello world"
    message = await _whole(client, "/v1/chat/completions", {"reasoning_format": "none", "enable_thinking": False})
    assert message["content"] == "Hello world"


async def test_an_unknown_format_is_a_400_naming_it(stack):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json={"messages": USER, "reasoning_format": "think"})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "reasoning_format"
    assert error["message"].startswith('invalid value for \'reasoning_format\': "think" is not one of ["none", "auto"')
