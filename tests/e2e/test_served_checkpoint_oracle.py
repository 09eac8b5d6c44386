"""End to end: checkpoints that transformers itself saves (random weights, config fields the tiny model keeps fixed)
served through the whole stack, whose greedy tokens, logprobs and prompt logprobs are transformers' own
(Qwen3NextForCausalLM / Qwen3_5MoeForCausalLM generate and log_softmax, fp32 as the CPU worker runs) while the engine
chunks every prompt (a 48-token budget, across DeltaNet's 64-token chunks), preempts (a 16-block KV pool), batches
concurrent requests and serves prefix-cache hits. The unit parity tests call the model directly; this is the served
path: loader, scheduler, worker steps, sampler and the /v1 answer."""
import concurrent.futures
import json
import os
import shutil

import httpx
import pytest
import torch

from tests.e2e.stack import DEFAULT_MODEL, EngineStack, running_gateway

transformers = pytest.importorskip("transformers")
COMMON = {"vocab_size": 1024, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 4,
          "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16, "linear_num_key_heads": 2,
          "linear_num_value_heads": 6, "linear_key_head_dim": 8, "linear_value_head_dim": 12,
          "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
          "shared_expert_intermediate_size": 24, "max_position_embeddings": 4096}
CHECKPOINTS = {
    # tied head, no renormalised top-k, a dense layer among the MoE ones, rope fields at the top level
    "qwen3_next": ("Qwen3NextForCausalLM", "Qwen3NextConfig", dict(
        COMMON, layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        norm_topk_prob=False, mlp_only_layers=[2], tie_word_embeddings=True, rope_theta=1e6,
        partial_rotary_factor=0.5)),
    "qwen3_5_moe": ("Qwen3_5MoeForCausalLM", "Qwen3_5MoeTextConfig", dict(
        COMMON, full_attention_interval=2, linear_conv_kernel_dim=3, rope_parameters={
            "rope_type": "yarn", "rope_theta": 1e4, "factor": 2.0, "original_max_position_embeddings": 2048})),
}
STACK_ENV = {"SPARKINFER_MAX_NUM_BATCHED_TOKENS": "48", "SPARKINFER_PREFIX_CACHE_MIN_TOKENS": "32"}
LENGTHS = [1, 63, 64, 65, 127, 129]
TOL = 1e-3


@pytest.fixture(scope="module", params=sorted(CHECKPOINTS))
def served(request, tmp_path_factory):
    """(transformers' model from the saved folder, the gateway's httpx client of a stack serving that folder, the
    scheduler's metrics URL)."""
    cls_name, config_name, fields = CHECKPOINTS[request.param]
    torch.manual_seed(0)
    model = getattr(transformers, cls_name)(getattr(transformers, config_name)(**json.loads(json.dumps(fields))))
    with torch.no_grad():
        for name, param in model.named_parameters():
            # larger than the init's 0.02, so that greedy choices are no near-ties that float noise could flip
            param.add_(torch.randn_like(param) * 0.1)
    folder = str(tmp_path_factory.mktemp(request.param))
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(DEFAULT_MODEL, name), folder)
    reference = getattr(transformers, cls_name).from_pretrained(folder, dtype=torch.float32).eval()
    reference.generation_config.eos_token_id = None
    with EngineStack(model=folder, env=STACK_ENV, worker_env={"SPARKINFER_NUM_KV_BLOCKS": "16"}) as stack:
        with running_gateway(stack) as url, httpx.Client(base_url=url, timeout=300) as http:
            yield reference, http, f"http://127.0.0.1:{stack.metrics_port}/metrics"


def _prompt(num_tokens: int, seed: int) -> list:
    return torch.randint(0, 1000, (num_tokens,), generator=torch.Generator().manual_seed(seed)).tolist()


def _complete(http, ids: list, **extra) -> dict:
    body = {"prompt": ids, "max_tokens": 16, "temperature": 0, "logprobs": 3, "ignore_eos": True,
            "return_token_ids": True, "return_tokens_as_token_ids": True, **extra}
    response = http.post("/v1/completions", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def _check(reference, ids: list, choice: dict) -> float:
    """Asserts the choice's tokens are transformers' greedy ones and its logprobs transformers' log_softmax; returns
    the largest logprob difference."""
    out = choice["token_ids"]
    with torch.no_grad():
        want = reference.generate(torch.tensor([ids]), max_new_tokens=len(out), do_sample=False,
                                  attention_mask=torch.ones(1, len(ids), dtype=torch.long))[0, len(ids):].tolist()
        logprobs = reference(torch.tensor([ids + out]), use_cache=False).logits[0].log_softmax(-1)
    assert out == want, (len(ids), out, want)
    worst = 0.0
    for i, token_id in enumerate(out):
        row = logprobs[len(ids) - 1 + i]
        top = {int(key.split(":")[1]): value for key, value in choice["logprobs"]["top_logprobs"][i].items()}
        assert set(top) == set(row.topk(3).indices.tolist())
        for tid, value in [(token_id, choice["logprobs"]["token_logprobs"][i]), *top.items()]:
            worst = max(worst, abs(value - row[tid].item()))
    for j, entry in enumerate(choice.get("prompt_logprobs") or []):
        if j:
            worst = max(worst, abs(entry[str(ids[j])]["logprob"] - logprobs[j - 1, ids[j]].item()))
    assert worst < TOL
    return worst


def _preemptions(metrics_url: str) -> float:
    text = httpx.get(metrics_url).text
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith("sparkinfer_num_preemptions_total"))


def test_concurrent_chunked_preempted_requests_give_transformers_tokens_and_logprobs(served):
    reference, http, metrics_url = served
    prompts = [_prompt(n, seed) for seed, n in enumerate(LENGTHS)]
    with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
        answers = list(pool.map(lambda ids: _complete(http, ids, prompt_logprobs=1, max_tokens=48), prompts))
    for ids, answer in zip(prompts, answers):
        assert len(answer["choices"][0]["prompt_logprobs"]) == len(ids)
        _check(reference, ids, answer["choices"][0])
    assert _preemptions(metrics_url) > 0


def test_prefix_cache_hit_and_n_3_give_transformers_tokens(served):
    """The second and third prompts share the first's 96 tokens up to an <|im_start|> (a checkpoint past the
    32-token minimum): served from the cache, they still continue as transformers does, each of n=3 choices."""
    reference, http, _ = served
    anchor = 1016
    shared = _prompt(40, 20) + [anchor] + _prompt(55, 21) + [anchor]
    first = _complete(http, shared + _prompt(30, 22))
    _check(reference, shared + _prompt(30, 22), first["choices"][0])
    for seed, n in ((23, 1), (24, 3)):
        ids = shared + _prompt(17, seed)
        answer = _complete(http, ids, n=n)
        assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
        assert len(answer["choices"]) == n
        for choice in answer["choices"]:
            _check(reference, ids, choice)
