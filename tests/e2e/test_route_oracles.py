"""End to end: one prompt through every route that takes it gives the same tokens, logprobs and prompt counts as the
others and as independent computations (transformers' tokenizer and chat template, its float32 forward).

vLLM returns raw logprobs by default (`logprobs_mode` raw_logprobs: log_softmax of the model's logits, before
temperature, penalties or filters); llama.cpp's `n_probs` without `post_sampling_probs` and Ollama's `logprobs` are
the same raw distribution. Seeds: vLLM's per-request generator makes a seeded request's text independent of its batch,
and choice i of `n` is seeded with seed + i (vllm/v1/engine/parallel_sampling.py); llama.cpp and Ollama promise the
same text for the same seed, prompt and options."""
import pytest
import torch

PROMPT = "The quick brown fox jumps over the lazy dog. The quick brown fox"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CONVERSATIONS = {
    "one-turn": ([{"role": "user", "content": "Say hello."}], {}),
    "multi-turn-no-thinking": ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                                {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Again"}],
                               {"enable_thinking": False}),
    "tools": ([{"role": "user", "content": "Weather in Paris?"}], {"tools": TOOLS}),
}
STEPS = 8


def post(http, path: str, body: dict) -> dict:
    response = http.post(path, json=body)
    assert response.status_code == 200, response.text
    return response.json()


def raw_logprobs(reference, ids: list) -> torch.Tensor:
    with torch.no_grad():
        return reference[0](torch.tensor([ids])).logits[0].float().log_softmax(-1)


def v1_completion(http, prompt, **fields) -> tuple:
    """(token ids, their logprobs, usage) of one /v1/completions choice."""
    answer = post(http, "/v1/completions", {"model": "tiny", "prompt": prompt, "max_tokens": STEPS,
                                            "return_token_ids": True, "logprobs": 2, **fields})
    choice = answer["choices"][0]
    return choice["token_ids"], choice["logprobs"]["token_logprobs"], answer["usage"]


def assert_close(a: list, b: list, tol: float = 1e-5) -> None:
    assert len(a) == len(b) and max(abs(x - y) for x, y in zip(a, b)) < tol, (a, b)


def test_raw_prompt_routes_agree_on_ids_logprobs_and_prompt_count(http, reference):
    tokenizer = reference[1]
    ids, logprobs, usage = v1_completion(http, PROMPT, temperature=0)
    llama = post(http, "/completion", {"prompt": PROMPT, "n_predict": STEPS, "temperature": 0, "return_tokens": True,
                                       "n_probs": 2})
    ollama = post(http, "/api/generate", {"model": "tiny", "prompt": PROMPT, "raw": True, "stream": False,
                                          "logprobs": True, "options": {"temperature": 0, "num_predict": STEPS}})
    counted = post(http, "/tokenize", {"model": "tiny", "prompt": PROMPT})
    assert llama["tokens"] == ids
    assert_close([p["logprob"] for p in llama["completion_probabilities"]], logprobs)
    assert_close([p["logprob"] for p in ollama["logprobs"]], logprobs)
    assert "".join(p["token"] for p in ollama["logprobs"]) == ollama["response"]
    assert counted["tokens"] == tokenizer.encode(PROMPT)
    assert usage["prompt_tokens"] == llama["tokens_evaluated"] == ollama["prompt_eval_count"] == counted["count"]
    assert usage["completion_tokens"] == llama["tokens_predicted"] == ollama["eval_count"] == STEPS


@pytest.mark.parametrize("name", CONVERSATIONS)
def test_chat_is_the_completion_of_its_rendered_template(http, reference, name):
    tokenizer = reference[1]
    messages, fields = CONVERSATIONS[name]
    template_kwargs = {k: v for k, v in fields.items() if k == "enable_thinking"}
    expected = tokenizer.apply_chat_template(messages, tools=fields.get("tools"), add_generation_prompt=True,
                                             tokenize=False, **template_kwargs)
    expected_ids = tokenizer(expected, add_special_tokens=False)["input_ids"]
    assert post(http, "/apply-template", {"messages": messages, **fields})["prompt"] == expected
    assert post(http, "/tokenize", {"model": "tiny", "messages": messages, **fields})["tokens"] == expected_ids
    chat = post(http, "/v1/chat/completions", {"model": "tiny", "messages": messages, "max_tokens": STEPS,
                                               "temperature": 0, "logprobs": True, "return_token_ids": True, **fields})
    ids, logprobs, _ = v1_completion(http, expected, temperature=0)
    assert chat["usage"]["prompt_tokens"] == len(expected_ids)
    assert chat["choices"][0]["token_ids"] == ids
    assert_close([entry["logprob"] for entry in chat["choices"][0]["logprobs"]["content"]], logprobs)


def test_logprobs_are_the_raw_distribution_whatever_the_processors(http, reference):
    prompt_ids = reference[1].encode(PROMPT)
    sampling = {"temperature": 0.6, "seed": 7, "presence_penalty": 1.5, "frequency_penalty": 0.5}
    ids, logprobs, _ = v1_completion(http, prompt_ids, repetition_penalty=1.3, logit_bias={"477": 4}, **sampling)
    llama = post(http, "/completion", {"prompt": prompt_ids, "n_predict": STEPS, "return_tokens": True,
                                       "n_probs": 3, "repeat_penalty": 1.3, **sampling})
    for out, served in ((ids, logprobs), (llama["tokens"], [p["logprob"] for p in llama["completion_probabilities"]])):
        expected = raw_logprobs(reference, prompt_ids + out)[len(prompt_ids) - 1:]
        assert_close(served, [expected[i, token_id].item() for i, token_id in enumerate(out)])
    # `expected` is llama.cpp's now, the loop's last
    for i, position in enumerate(llama["completion_probabilities"]):
        top = [entry["logprob"] for entry in position["top_logprobs"]]
        assert top == sorted(top, reverse=True)
        assert_close(top, expected[i].topk(3).values.tolist())


def test_seeded_choices_are_per_prompt_generators_seeded_seed_plus_index(http):
    def choices(prompt, n, seed) -> list:
        answer = post(http, "/v1/completions", {"model": "tiny", "prompt": prompt, "max_tokens": STEPS, "n": n,
                                                "seed": seed, "temperature": 1.0, "return_token_ids": True})
        return [c["token_ids"] for c in sorted(answer["choices"], key=lambda c: c["index"])]
    three = choices(PROMPT, 3, 40)
    assert three == choices(PROMPT, 3, 40)
    assert three == [choices(PROMPT, 1, 40 + i)[0] for i in range(3)]
    assert len({tuple(c) for c in three}) == 3
    # Two prompts of one request: each has its own generators, seed + choice index, as vLLM fans each prompt out.
    assert choices([PROMPT, PROMPT], 2, 40) == three[:2] * 2


def test_a_seed_repeats_on_every_route_and_chat_samples_as_its_rendered_completion(http):
    messages = [{"role": "user", "content": "hi"}]
    rendered = post(http, "/apply-template", {"messages": messages})["prompt"]
    sampled = {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "seed": 3}
    chat = [post(http, "/v1/chat/completions", {"model": "tiny", "messages": messages, "max_tokens": STEPS,
                                                "return_token_ids": True, **sampled})["choices"][0]["token_ids"]
            for _ in range(2)]
    assert chat[0] == chat[1] == v1_completion(http, rendered, **sampled)[0]
    llama = [post(http, "/completion", {"prompt": PROMPT, "n_predict": STEPS, "return_tokens": True, "min_p": 0,
                                        **sampled})["tokens"] for _ in range(2)]
    ollama = [post(http, "/api/generate", {"model": "tiny", "prompt": PROMPT, "raw": True, "stream": False,
                                           "options": {"num_predict": STEPS, **sampled}})["response"]
              for _ in range(2)]
    assert llama[0] == llama[1] and ollama[0] == ollama[1]
    other_seed = post(http, "/completion", {"prompt": PROMPT, "n_predict": STEPS, "return_tokens": True, "min_p": 0,
                                            **sampled, "seed": 4})["tokens"]
    assert other_seed != llama[0]
