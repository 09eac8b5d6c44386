"""An empty prompt on llama.cpp's /completion: llama-server answers at once with an empty final object, nothing
generated (server-context.cpp: "empty prompt passed -> release the slot and send empty response", the prompt of a model
whose tokenizer adds no BOS, as Qwen's, tokenizing to no tokens; ggml-org/llama.cpp#5953): 200 with content "",
tokens_predicted 0, tokens_evaluated 0, stop_type "none". It was vLLM's 400 'Either prompt or prompt_embeds must be
provided and non-empty.', which /v1/completions keeps."""
import json


async def test_an_empty_prompt_is_an_empty_answer(stack):
    client, fake = stack
    response = await client.post("/completion", json={"prompt": "", "n_predict": 8})
    body = await response.json()
    assert response.status == 200, body
    assert (body["content"], body["tokens_predicted"], body["tokens_evaluated"]) == ("", 0, 0)
    assert (body["stop"], body["stop_type"], body["prompt"], body["truncated"]) == (True, "none", "", False)
    assert body["generation_settings"]["n_predict"] == 8 and fake.script.requests == []


async def test_streamed_it_is_one_final_event(stack):
    client, fake = stack
    response = await client.post("/completion", json={"prompt": "", "stream": True})
    events = [json.loads(line[6:]) for line in (await response.text()).splitlines() if line.startswith("data: ")]
    assert response.status == 200 and len(events) == 1
    assert (events[0]["content"], events[0]["stop"], events[0]["stop_type"]) == ("", True, "none")


async def test_v1_completions_keeps_vllms_400(stack):
    client, _ = stack
    response = await client.post("/v1/completions", json={"prompt": "", "max_tokens": 2})
    assert response.status == 400
    assert (await response.json())["error"]["message"] == \
        "Either prompt or prompt_embeds must be provided and non-empty."
