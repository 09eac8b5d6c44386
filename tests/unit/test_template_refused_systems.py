"""Unit tests: a chat whose system or developer messages the chat template refuses where they stand (Qwen3.5's official
template takes one system message, first, and no developer role) is rendered with them folded into one leading system
message on the OpenAI-shaped routes, as /api/chat, /v1/responses and /v1/messages fold them, instead of the template's
400 'System message must be at the beginning.' (vllm#41114; OpenCode #15059 / #45055 send several system messages,
Hermes Agent one after the turns, pi and Codex a developer one). A template that takes them where they stand renders
them there, as transformers and vLLM do."""
import pytest

from tests.unit.conversation_routes import one_system
from tests.unit.test_chat_template_oracle import hf_tokenizer
from tests.unit.test_generated_conversations import oracle, prompt_of, served_template  # noqa: F401 - a fixture

QWEN3_5 = "qwen3.5"
CHATS = {
    # OpenCode's agent prompt and a plugin's instructions (opencode#15059's wire payload).
    "two-systems": [{"role": "system", "content": "You are opencode."},
                    {"role": "system", "content": "<goal_continuation>\ndraw a ball\n</goal_continuation>"},
                    {"role": "user", "content": "draw a ball"}],
    # Hermes Agent's summarizing task after the turns (vllm#41114).
    "system-after-turns": [{"role": "user", "content": "prior context"}, {"role": "assistant", "content": "prior reply"},
                           {"role": "system", "content": "task instruction: summarize the above"},
                           {"role": "user", "content": "new query"}],
    # OpenAI-style clients' developer role (oh-my-pi#958: 'Unexpected message role.' until supportsDeveloperRole off).
    "developer": [{"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "terse."}]},
                  {"role": "user", "content": "Hi"}],
    "system-and-developer": [{"role": "system", "content": "Sys."}, {"role": "user", "content": "Hi"},
                             {"role": "assistant", "content": "Hello"},
                             {"role": "developer", "content": "  Now in French.  "}, {"role": "user", "content": "Go"}],
}
ROUTES = ("/v1/chat/completions", "/v1/tokenize", "/v1/chat/completions/render", "/apply-template",
          "/api/v0/chat/completions")


@pytest.mark.parametrize("path", ROUTES)
@pytest.mark.parametrize("name", CHATS)
async def test_refused_system_messages_are_folded(served_template, name, path):
    client, fake, source = served_template
    messages = CHATS[name]
    body = {"model": "default", "messages": messages, "max_tokens": 1}
    status, got = await prompt_of(client, fake, path, body)
    assert status == 200, got
    in_place = oracle(messages, {}, source)
    if source is None:
        # The checkpoint's template takes them where they stand: transformers' prompt, unchanged.
        expected = in_place
    else:
        assert in_place is None  # the official template refuses the chat as sent
        expected = oracle(one_system(messages), {}, source)
    if path == "/apply-template":
        expected = hf_tokenizer().decode(expected)
    assert got == expected


async def test_a_refusal_that_folding_does_not_cure_is_still_the_templates_400(served_template):
    # Qwen3.5's template needs a user query: a system message and tool results alone are its 400 either way.
    client, fake, source = served_template
    messages = [{"role": "system", "content": "a"}, {"role": "developer", "content": "b"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "r"}]
    status, got = await prompt_of(client, fake, "/v1/chat/completions", {"model": "default", "messages": messages})
    if source is None:
        assert status == 200
    else:
        assert status == 400 and "No user query found" in got["error"]["message"]
