"""A message whose content is a list holding plain strings reads each string as a text part, as vLLM's chat_utils
reads it (_parse_chat_message_content_part: `if isinstance(part, str)`, wrapped as {"type": "text", "text": part}
for templates that iterate parts). LangChain's ChatOpenAI sends such lists as they are (HumanMessage(content=["hi",
"there"]); langchain_openai's _format_message_content passes string blocks on); they were a 400 'is not of type
"object"' for the whole conversation. Driven through the real openai SDK too (fake scheduler)."""
import openai
import pytest


def _prompt(fake) -> str:
    return fake.tokenizer.decode(list(fake.script.requests[-1].prompt_token_ids), skip_special_tokens=False)


def _chat(messages: list) -> dict:
    return {"messages": messages, "max_tokens": 4, "enable_thinking": False}


@pytest.mark.parametrize("role, content, rendered", [
    ("user", ["Hello ", "world"], "<|im_start|>user\nHello world<|im_end|>"),
    ("system", ["Be ", "brief."], "<|im_start|>system\nBe brief.<|im_end|>"),
    ("user", ["One. ", {"type": "text", "text": "Two."}], "<|im_start|>user\nOne. Two.<|im_end|>"),
], ids=["user", "system", "mixed"])
async def test_string_parts_render_as_text_parts(stack, role, content, rendered):
    client, fake = stack
    messages = [{"role": role, "content": content}] + ([{"role": "user", "content": "go"}] if role == "system" else [])
    response = await client.post("/v1/chat/completions", json=_chat(messages))
    assert response.status == 200, await response.text()
    assert rendered in _prompt(fake)


async def test_an_assistant_turn_of_strings_is_replayed(stack):
    client, fake = stack
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": ["Par", "is."]},
                {"role": "user", "content": "again"}]
    response = await client.post("/v1/chat/completions", json=_chat(messages))
    assert response.status == 200, await response.text()
    assert "<|im_start|>assistant\nParis.<|im_end|>" in _prompt(fake)


async def test_the_same_prompt_as_typed_text_parts_and_tokenize_counts_it(stack):
    client, fake = stack
    typed = [{"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "world"}]}]
    assert (await client.post("/v1/chat/completions", json=_chat(typed))).status == 200
    typed_ids = list(fake.script.requests[-1].prompt_token_ids)
    strings = [{"role": "user", "content": ["Hello ", "world"]}]
    assert (await client.post("/v1/chat/completions", json=_chat(strings))).status == 200
    assert list(fake.script.requests[-1].prompt_token_ids) == typed_ids
    counted = await client.post("/v1/tokenize", json={"messages": strings, "enable_thinking": False})
    assert counted.status == 200 and (await counted.json())["count"] == len(typed_ids)


async def test_the_openai_sdk_sends_string_parts_and_gets_an_answer(stack):
    client, fake = stack
    sdk = openai.AsyncOpenAI(base_url=str(client.make_url("/v1")), api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": ["Hi ", "you"]}]
    reply = await sdk.chat.completions.create(model="fake-model", messages=messages, max_tokens=4,
                                              extra_body={"enable_thinking": False})
    assert reply.choices[0].message.content == "Hello world"
    assert "<|im_start|>user\nHi you<|im_end|>" in _prompt(fake)


@pytest.mark.parametrize("part", [5, None, ["nested"]], ids=["number", "null", "list"])
async def test_a_part_that_is_neither_text_nor_an_object_stays_a_400(stack, part):
    client, _ = stack
    response = await client.post("/v1/chat/completions", json=_chat([{"role": "user", "content": ["ok", part]}]))
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == "messages[0].content[1]"
