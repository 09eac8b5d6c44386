"""SGLang's own /v1 fields (fake scheduler), as its ChatCompletionRequest / CompletionRequest read them: regex and ebnf
constrain the output as vLLM's guided_regex / guided_grammar do, no_stop_trim keeps the matched stop string, and the
fields asking for what is not served (stop_regex, lora_path, custom_logit_processor, a chat's input_ids,
return_hidden_states, return_routed_experts, session_params, return_meta_info; vLLM's prompt_embeds and
logits_processors) are a 400 naming them, and return_prompt_token_ids gives each chat choice its prompt's ids. All of
them were dropped as unknown fields."""
import orjson
import pytest

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
BASE = {"model": "default", "messages": [{"role": "user", "content": "hi"}], "enable_thinking": False,
        "max_tokens": 8}
PROMPT = {"model": "default", "prompt": "hi", "max_tokens": 8}
REPLY = "Hello world. STOP and more"


async def post(client, body, path=CHAT):
    response = await client.post(path, data=orjson.dumps(body))
    return response.status, orjson.loads(await response.read())


GRAMMARS = [({"regex": "[a-z]+/[0-9]"}, "start: /[a-z]+\\/[0-9]/\n"),
            ({"regex": "\\d{3}"}, "start: /[0-9]{3}/\n"),
            ({"ebnf": 'root ::= "yes" | "no"'}, None),
            ({"ebnf": 'start: "x"'}, 'start: "x"')]


@pytest.mark.parametrize("path,base", [(CHAT, BASE), (COMPLETIONS, PROMPT)], ids=["chat", "completions"])
@pytest.mark.parametrize("field,grammar", GRAMMARS, ids=["regex", "regex-ascii", "ebnf-gbnf", "ebnf-lark"])
async def test_regex_and_ebnf_become_the_constraint(stack, path, base, field, grammar):
    client, fake = stack
    status, body = await post(client, {**base, **field}, path)
    assert status == 200, body
    constraint = fake.script.requests[0].constraint
    assert constraint.kind == "lark"
    if grammar is None:
        assert '"yes"' in constraint.grammar and '"no"' in constraint.grammar
    else:
        assert constraint.grammar == grammar


@pytest.mark.parametrize("other,param", [({"guided_regex": "a"}, "regex"),
                                         ({"response_format": {"type": "json_object"}}, "regex")])
async def test_regex_with_another_constraint_is_a_400(stack, other, param):
    client, fake = stack
    status, body = await post(client, {**BASE, "regex": "[0-9]+", **other})
    assert status == 400 and body["error"]["param"] in (param, "guided_regex"), body
    assert not fake.script.requests


async def test_a_bad_ebnf_is_a_400_naming_it(stack):
    client, _ = stack
    status, body = await post(client, {**BASE, "ebnf": 'root ::= undefined_rule'})
    assert status == 400 and body["error"]["param"] == "ebnf", body


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("path,base", [(CHAT, BASE), (COMPLETIONS, PROMPT)], ids=["chat", "completions"])
async def test_no_stop_trim_keeps_the_stop_string(stack, path, base, stream):
    client, _ = stack
    body = {**base, "max_tokens": 40, "stop": ["STOP"], "no_stop_trim": True, "stream": stream}
    response = await client.post(path, data=orjson.dumps(body))
    raw = await response.read()
    assert response.status == 200, raw
    if stream:
        text = ""
        for line in raw.decode().splitlines():
            if line.startswith("data: {"):
                for choice in orjson.loads(line[6:])["choices"]:
                    text += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
    else:
        choice = orjson.loads(raw)["choices"][0]
        text = choice["text"] if path == COMPLETIONS else choice["message"]["content"]
    assert text == "Hello world. STOP"


REFUSED = [("stop_regex", ["\\d+"]), ("lora_path", "my-adapter"), ("custom_logit_processor", "{}"),
           ("input_ids", [1, 2, 3]), ("prompt_embeds", "AAAA"), ("logits_processors", ["my.module.Proc"]),
           ("return_hidden_states", True), ("return_hidden_states", "last"), ("return_routed_experts", True),
           ("session_params", {"id": "session-1", "offset": -1}), ("return_meta_info", True)]


@pytest.mark.parametrize("path,base", [(CHAT, BASE), (COMPLETIONS, PROMPT)], ids=["chat", "completions"])
@pytest.mark.parametrize("name,value", REFUSED, ids=[f"{r[0]}-{r[1]!r}" for r in REFUSED])
async def test_fields_asking_for_what_is_not_served_are_refused(stack, name, value, path, base):
    """return_hidden_states, return_routed_experts and session_params (SGLang's CompletionRequest and
    ChatCompletionRequest) were dropped as unknown fields: a 200 without the hidden states or expert routing asked
    for, or answering a session's continuation without the session's context."""
    client, fake = stack
    status, body = await post(client, {**base, name: value}, path)
    assert status == 400 and body["error"]["code"] == "unsupported" and body["error"]["param"] == name, body
    assert not fake.script.requests


async def test_their_empty_values_are_accepted(stack):
    client, _ = stack
    status, body = await post(client, {**BASE, "stop_regex": [], "lora_path": None, "input_ids": None,
                                       "no_stop_trim": False, "regex": None, "ebnf": None,
                                       "return_hidden_states": False, "return_routed_experts": False,
                                       "session_params": None, "return_meta_info": False,
                                       "return_prompt_token_ids": False})
    assert status == 200 and body["choices"][0]["message"]["content"] == REPLY[:len(body["choices"][0]["message"]
                                                                                       ["content"])], body


@pytest.mark.parametrize("path", [CHAT, "/api/v0/chat/completions"], ids=["v1", "lm studio"])
async def test_return_prompt_token_ids_gives_each_chat_choice_its_prompt(stack, path):
    """SGLang's return_prompt_token_ids (RL rollouts ask for it beside logprobs to train on the ids the engine ran):
    each choice's prompt_token_ids, as SGLang's ChatCompletionResponseChoice carries them. It was dropped as an
    unknown field, so such a client silently got no ids."""
    client, fake = stack
    status, body = await post(client, {**BASE, "n": 2, "return_prompt_token_ids": True}, path)
    assert status == 200, body
    sent = list(fake.script.requests[0].prompt_token_ids)
    assert [choice["prompt_token_ids"] for choice in body["choices"]] == [sent, sent]
    assert "prompt_token_ids" not in body and "token_ids" not in body["choices"][0]


async def test_return_prompt_token_ids_streamed_is_sglang_s_400(stack):
    client, fake = stack
    status, body = await post(client, {**BASE, "stream": True, "return_prompt_token_ids": True})
    assert status == 400 and body["error"]["param"] == "return_prompt_token_ids", body
    assert "Please set stream=false" in body["error"]["message"] and not fake.script.requests
