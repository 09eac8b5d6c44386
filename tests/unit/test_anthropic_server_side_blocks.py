"""/v1/messages (fake scheduler): the blocks of an assistant turn that Anthropic's side ran (a server tool's call and
result, the MCP connector's) are left out of the prompt, and a compaction block reads as its summary. A conversation
begun with Anthropic's API and carried on here replays them; they were the 400 "content blocks of type
'server_tool_use' are not supported here" on every later request (can1357/oh-my-pi#6496: a replayed web search
400s on a non-Anthropic endpoint), as Codex's OpenAI-side items were on /v1/responses."""
import pytest

USER = {"role": "user", "content": "Find the docs."}
AGAIN = {"role": "user", "content": "Go on."}
SEARCH = {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "sparkinfer docs"}}
SERVER_SIDE = {
    "web search": [SEARCH, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
        {"type": "web_search_result", "url": "https://example.com/a", "title": "Docs", "encrypted_content": "Eo8x",
         "page_age": None}]}],
    "web search error": [SEARCH, {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_01",
                                  "content": {"type": "web_search_tool_result_error", "error_code": "unavailable"}}],
    "web fetch": [{**SEARCH, "name": "web_fetch", "input": {"url": "https://example.com/a"}},
                  {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_01", "content": {
                      "type": "web_fetch_result", "url": "https://example.com/a", "content": {
                          "type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "page"}}}}],
    "code execution": [{**SEARCH, "name": "code_execution", "input": {"code": "print(1)"}},
                       {"type": "code_execution_tool_result", "tool_use_id": "srvtoolu_01", "content": {
                           "type": "code_execution_result", "stdout": "1\n", "stderr": "", "return_code": 0,
                           "content": []}}],
    "mcp connector": [{"type": "mcp_tool_use", "id": "mcptoolu_01", "name": "lookup", "server_name": "docs",
                       "input": {"q": "x"}},
                      {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_01", "is_error": False,
                       "content": [{"type": "text", "text": "found"}]}],
    # The SDKs' beta blocks (anthropic-python 2.15 types/beta): they were the same 400.
    "advisor": [{**SEARCH, "name": "advisor", "input": {}},
                {"type": "advisor_tool_result", "tool_use_id": "srvtoolu_01",
                 "content": {"type": "advisor_result", "text": "found", "stop_reason": None}}],
    "mcp tool listing": [{"type": "mcp_tool_listing", "mcp_server_name": "docs", "tools": [
        {"name": "lookup", "description": "found", "input_schema": {"type": "object"}}]}],
    "fallback": [{"type": "fallback", "from": {"model": "claude-opus-5"}, "to": {"model": "claude-sonnet-5"},
                  "trigger": {"type": "unavailable"}}],
}


def prompt_of(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


async def rendered(client, fake, messages: list, stream: bool = False) -> str:
    body = {"model": "fake-model", "max_tokens": 16, "messages": messages, "stream": stream}
    response = await client.post("/v1/messages", json=body)
    assert response.status == 200, await response.text()
    await response.read()
    prompt = prompt_of(fake)
    counted = await client.post("/v1/messages/count_tokens", json=body)
    assert (await counted.json())["input_tokens"] == len(fake.script.requests[-1].prompt_token_ids)
    return prompt


def answer(*blocks) -> dict:
    return {"role": "assistant", "content": [{"type": "text", "text": "Searching."}, *blocks,
                                             {"type": "text", "text": "Here they are."}]}


@pytest.mark.parametrize("blocks", SERVER_SIDE.values(), ids=SERVER_SIDE.keys())
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_block_anthropics_side_ran_is_left_out(stack, blocks, stream):
    client, fake = stack
    replayed = await rendered(client, fake, [USER, answer(*blocks), AGAIN], stream)
    assert replayed == await rendered(client, fake, [USER, answer(), AGAIN])
    assert "Searching.\nHere they are." in replayed or "Searching.Here they are." in replayed, replayed[-300:]
    for hidden in ("sparkinfer docs", "Eo8x", "page", "print(1)", "found", "unavailable", "claude-"):
        assert hidden not in replayed


async def test_a_compaction_block_reads_as_its_summary(stack):
    client, fake = stack
    compacted = {"role": "assistant", "content": [{"type": "compaction", "content": "Earlier: the user asked for X."},
                                                  {"type": "text", "text": "Done."}]}
    as_text = {"role": "assistant", "content": [{"type": "text", "text": "Earlier: the user asked for X."},
                                                {"type": "text", "text": "Done."}]}
    replayed = await rendered(client, fake, [USER, compacted, AGAIN])
    assert replayed == await rendered(client, fake, [USER, as_text, AGAIN])
    assert "Earlier: the user asked for X." in replayed
    failed = {"role": "assistant", "content": [{"type": "compaction", "content": None}, {"type": "text", "text": "Done."}]}
    assert await rendered(client, fake, [USER, failed, AGAIN]) == await rendered(
        client, fake, [USER, {"role": "assistant", "content": "Done."}, AGAIN])


@pytest.mark.parametrize("block, param", [
    (SEARCH, "messages.0.content.0"),
    ({"type": "compaction", "content": 5}, None),
], ids=["server tool call in a user turn", "compaction of no text"])
async def test_what_stays_a_400(stack, block, param):
    client, _ = stack
    messages = [{"role": "user", "content": [block]}] if param else [USER, {"role": "assistant", "content": [block]}]
    response = await client.post("/v1/messages", json={"model": "fake-model", "max_tokens": 16, "messages": messages})
    assert response.status == 400, await response.text()
    error = (await response.json())["error"]
    assert error["type"] == "invalid_request_error" and "messages" in error["message"], error
