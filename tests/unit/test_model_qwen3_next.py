"""Unit tests (CPU): our packed forward of the tiny Qwen3-Next and Qwen3.5-MoE checkpoints is the same function as
transformers' Qwen3NextForCausalLM / Qwen3_5MoeForCausalLM loaded from the same folder (fp32, torch fallbacks)."""
import importlib.util
import random

import pytest
import torch

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.layers.moe import SparseMoeBlock
from worker.loader import load_model
from worker.tiny import write_tiny_checkpoint

transformers = pytest.importorskip("transformers")
BLOCK_SIZE = 16
TOL = 1e-4
HF_CLASSES = {"qwen3_next": "Qwen3NextForCausalLM", "qwen3_5_moe": "Qwen3_5MoeForCausalLM"}


@pytest.fixture(scope="module", params=sorted(HF_CLASSES))
def tiny_path(request, tmp_path_factory):
    path = str(tmp_path_factory.mktemp(request.param))
    write_tiny_checkpoint(path, arch=request.param)
    return path


@pytest.fixture(scope="module")
def ours(tiny_path):
    return load_model(tiny_path, dtype=torch.float32, progress=False)


@pytest.fixture(scope="module")
def reference(ours, tiny_path):
    """transformers' model from the same folder; every checkpoint tensor used, none missing."""
    for module in ("fla", "causal_conv1d"):
        assert importlib.util.find_spec(module) is None, f"{module} would replace the torch oracle"
    cls = getattr(transformers, HF_CLASSES[ours[1].model_type])
    model, info = cls.from_pretrained(tiny_path, dtype=torch.float32, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    model.eval().generation_config.eos_token_id = None
    return model


def _prompt(num_tokens, vocab_size, seed=0):
    return torch.randint(0, vocab_size, (num_tokens,), generator=torch.Generator().manual_seed(seed))


def _max_rel(got, want):
    return ((got - want).abs().max() / want.abs().max()).item()


def _cache(config, num_blocks=32, num_slots=8, block_size=BLOCK_SIZE):
    return ModelCache(config, num_blocks=num_blocks, block_size=block_size, num_slots=num_slots, device="cpu",
                      dtype=torch.float32)


def test_config_layers_and_routing_are_exercised(ours):
    model, config = ours
    moe_layers = [i for i, layer in enumerate(model.layers) if isinstance(layer.mlp, SparseMoeBlock)]
    expected = [0, 2, 3] if config.model_type == "qwen3_next" else [0, 1, 2, 3]
    assert moe_layers == expected and config.attention_layer_ids == [3]
    assert config.num_experts == 4 and config.num_experts_per_tok == 2
    assert config.linear_num_value_heads == 2 * config.linear_num_key_heads
    x = torch.randn(200, config.hidden_size, generator=torch.Generator().manual_seed(1))
    _, experts = torch.topk(x @ model.layers[0].mlp.router.T, 2, dim=-1)
    assert torch.bincount(experts.flatten(), minlength=4).min() > 10, "tiny router sends every token one way"


def test_logits_match_transformers_80_token_prompt(ours, reference):
    model, config = ours
    ids = _prompt(80, config.vocab_size)
    batch = ForwardBatch.from_rows([(ids.tolist(), 0, 2, [7, 2, 11, 5, 0], True)], BLOCK_SIZE)
    logits = model(batch, _cache(config), all_logits=True)
    with torch.no_grad():
        ref = reference(ids[None]).logits[0].float()
    assert logits.shape == ref.shape == (80, config.vocab_size)
    err = _max_rel(logits, ref)
    print(f"{config.model_type}: max relative error vs transformers (80 tokens, fp32): {err:.3e}")
    assert err < TOL
    assert torch.equal(logits.argmax(-1), ref.argmax(-1))


def test_eager_experts_of_transformers_agree(ours, tiny_path):
    """transformers' default experts path is grouped_mm; its per-expert 'eager' loop gives the same logits."""
    model, config = ours
    cls = getattr(transformers, HF_CLASSES[config.model_type])
    eager = cls.from_pretrained(tiny_path, dtype=torch.float32, experts_implementation="eager").eval()
    ids = _prompt(40, config.vocab_size, seed=4)
    logits = model(ForwardBatch.from_rows([(ids.tolist(), 0, 0, [1, 4, 6], True)], BLOCK_SIZE), _cache(config),
                   all_logits=True)
    with torch.no_grad():
        ref = eager(ids[None]).logits[0]
    assert _max_rel(logits, ref) < TOL


def _greedy(model, config, prompt, num_new):
    cache, blocks = _cache(config), [4, 1, 6, 0, 9, 12]
    tokens, step_ids, context = [], list(prompt), 0
    for _ in range(num_new):
        next_id = int(model(ForwardBatch.from_rows([(step_ids, context, 1, blocks, True)], BLOCK_SIZE),
                            cache).argmax(-1)[0])
        context += len(step_ids)
        tokens.append(next_id)
        step_ids = [next_id]
    return tokens


def test_greedy_16_tokens_match_transformers_generate(ours, reference):
    model, config = ours
    prompt = _prompt(70, config.vocab_size, seed=2)
    got = _greedy(model, config, prompt.tolist(), 16)
    with torch.no_grad():
        want = reference.generate(prompt[None], max_new_tokens=16, do_sample=False)[0, 70:].tolist()
    assert got == want
    assert len(set(got)) > 4, "tiny model greedy output is degenerate"


# Per sequence: (first step, chunk sizes). A crosses a 64-token chunk inside one prefill chunk of 66.
SCHEDULE = {"A": (0, [66, 1, 1, 9, 1]), "B": (0, [20, 1, 1, 1, 1]), "C": (1, [1, 33, 1, 1])}


def test_packed_batch_of_3_equals_solo_runs(ours):
    model, config = ours
    rng = random.Random(5)
    seqs = {n: _prompt(sum(c), config.vocab_size, seed=10 + i).tolist()
            for i, (n, (_, c)) in enumerate(SCHEDULE.items())}
    solo = {n: model(ForwardBatch.from_rows([(ids, 0, 0, list(range(-(-len(ids) // 8))), True)], 8),
                     _cache(config, block_size=8), all_logits=True) for n, ids in seqs.items()}
    cache = _cache(config, num_blocks=40, block_size=8)
    free = rng.sample(range(40), 40)
    blocks = {n: [free.pop() for _ in range(-(-len(ids) // 8))] for n, ids in seqs.items()}
    slots = {"A": 5, "B": 0, "C": 3}
    steps = {}
    for name, (first, chunks) in SCHEDULE.items():
        start = 0
        for i, size in enumerate(chunks):
            steps.setdefault(first + i, []).append((name, start, start + size))
            start += size
    checked = 0
    for index in sorted(steps):
        step = steps[index]
        rng.shuffle(step)
        rows = [(seqs[n][lo:hi], lo, slots[n], blocks[n], True) for n, lo, hi in step]
        logits = model(ForwardBatch.from_rows(rows, 8), cache)
        want = torch.stack([solo[n][hi - 1] for n, _, hi in step])
        assert _max_rel(logits, want) < TOL
        checked += len(step)
    assert checked == sum(len(c) for _, c in SCHEDULE.values())


def test_host_sync_free_expert_path_equals_gather_path(ours):
    """experts_dense (used under CUDA-graph capture) computes the same routed sum as the gather/scatter path."""
    model, config = ours
    moe = model.layers[0].mlp
    x = torch.randn(37, config.hidden_size, generator=torch.Generator().manual_seed(8))
    weights, experts = torch.rand(37, 2, generator=torch.Generator().manual_seed(9)), torch.stack(
        [torch.randperm(4, generator=torch.Generator().manual_seed(i))[:2] for i in range(37)])
    got = moe.experts_dense(x, weights, experts)
    assert got.abs().max() > 0.1
    torch.testing.assert_close(got, moe.experts_forward(x, weights, experts), rtol=1e-5, atol=1e-6)


def test_bf16_forward_close_to_transformers_bf16(ours, tiny_path):
    """bf16 end to end (router logits in bf16, softmax fp32, routing weights cast back to bf16, as transformers)."""
    config = ours[1]
    model, _ = load_model(tiny_path, dtype=torch.bfloat16, progress=False)
    hf = getattr(transformers, HF_CLASSES[config.model_type]).from_pretrained(tiny_path, dtype=torch.bfloat16).eval()
    ids = _prompt(64, config.vocab_size, seed=3)
    cache = ModelCache(config, num_blocks=4, block_size=BLOCK_SIZE, num_slots=1, device="cpu", dtype=torch.bfloat16)
    logits = model(ForwardBatch.from_rows([(ids.tolist(), 0, 0, [3, 1, 0, 2], True)], BLOCK_SIZE), cache,
                   all_logits=True)
    with torch.no_grad():
        ref = hf(ids[None]).logits[0].float()
    err = _max_rel(logits, ref)
    print(f"{config.model_type}: max relative error vs transformers (64 tokens, bf16): {err:.3e}")
    assert err < 1e-2
    assert (logits.argmax(-1) == ref.argmax(-1)).float().mean() > 0.95


def test_moe_models_are_never_graph_captured():
    """Inside a CUDA graph the MoE block would run every expert on every token, so MoE models stay eager."""
    from types import SimpleNamespace

    from worker.graphs import DecodeGraphs
    from worker.layers.moe import SparseMoeBlock

    class CudaBf16Probe:
        is_cuda, dtype = True, torch.bfloat16

    class Embed:
        def __getitem__(self, _):
            return CudaBf16Probe()

    kernels = SimpleNamespace(uses_kernels=lambda probe: True)
    dense = SimpleNamespace(is_attention=False, mixer=kernels, mlp=torch.nn.Identity())
    moe = SimpleNamespace(is_attention=False, mixer=kernels, mlp=SparseMoeBlock.__new__(SparseMoeBlock))
    assert DecodeGraphs.capturable(SimpleNamespace(embed_tokens=Embed(), layers=[dense, dense]))
    assert not DecodeGraphs.capturable(SimpleNamespace(embed_tokens=Embed(), layers=[dense, moe]))
