"""Unit tests (CPU): our packed forward is the same function as transformers' Qwen3_5ForCausalLM on the tiny checkpoint."""
import copy
import json
import os

import pytest
import torch
from safetensors.torch import load_file

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.loader import load_model
from worker.tiny import write_tiny_checkpoint

transformers = pytest.importorskip("transformers")
BLOCK_SIZE = 16


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tiny"))
    write_tiny_checkpoint(path)
    return path


@pytest.fixture(scope="module")
def ours(tiny_path):
    return load_model(tiny_path, dtype=torch.float32, progress=False)


@pytest.fixture(scope="module")
def reference(tiny_path):
    """transformers' text model with the checkpoint's weights (fp32, no fla: the torch fallbacks run)."""
    with open(os.path.join(tiny_path, "config.json"), encoding="utf-8") as f:
        text_config = json.load(f)["text_config"]
    model = transformers.Qwen3_5ForCausalLM(transformers.Qwen3_5TextConfig(**text_config)).eval().float()
    weights = load_file(os.path.join(tiny_path, "model.safetensors"))
    state = {name.replace("model.language_model.", "model."): t.float() for name, t in weights.items()}
    model.load_state_dict(state, strict=True)
    model.generation_config.eos_token_id = None
    return model


def _prompt(num_tokens, vocab_size, seed=0):
    return torch.randint(0, vocab_size, (num_tokens,), generator=torch.Generator().manual_seed(seed))


def _max_rel(ours_logits, ref_logits):
    return ((ours_logits - ref_logits).abs().max() / ref_logits.abs().max()).item()


def test_logits_match_transformers_64_token_prompt(ours, reference):
    model, config = ours
    ids = _prompt(64, config.vocab_size)
    cache = ModelCache(config, num_blocks=12, block_size=BLOCK_SIZE, num_slots=3, device="cpu", dtype=torch.float32)
    batch = ForwardBatch.from_rows([(ids.tolist(), 0, 2, [7, 2, 11, 5], True)], BLOCK_SIZE)
    logits = model(batch, cache, all_logits=True)
    with torch.no_grad():
        ref = reference(ids[None]).logits[0].float()
    assert logits.shape == ref.shape == (64, config.vocab_size) and logits.dtype == torch.float32
    err = _max_rel(logits, ref)
    print(f"max relative error vs transformers (64 tokens, fp32): {err:.3e}")
    assert err < 1e-4
    assert torch.equal(logits.argmax(-1), ref.argmax(-1))


def test_last_row_logits_match_transformers(ours, reference):
    model, config = ours
    ids = _prompt(37, config.vocab_size, seed=1)
    cache = ModelCache(config, num_blocks=8, block_size=BLOCK_SIZE, num_slots=1, device="cpu", dtype=torch.float32)
    logits = model(ForwardBatch.from_rows([(ids.tolist(), 0, 0, [3, 0, 6], True)], BLOCK_SIZE), cache)
    with torch.no_grad():
        ref = reference(ids[None]).logits[0, -1:].float()
    assert logits.shape == (1, config.vocab_size)
    assert _max_rel(logits, ref) < 1e-4


def _greedy(model, config, prompt, num_new):
    """Greedy decode with our forward: one prefill row, then one decode row per step."""
    cache = ModelCache(config, num_blocks=8, block_size=BLOCK_SIZE, num_slots=2, device="cpu", dtype=torch.float32)
    blocks = [4, 1, 6, 0]
    tokens = list(prompt)
    step_ids, context = list(prompt), 0
    for _ in range(num_new):
        batch = ForwardBatch.from_rows([(step_ids, context, 1, blocks, True)], BLOCK_SIZE)
        next_id = int(model(batch, cache).argmax(-1)[0])
        context += len(step_ids)
        tokens.append(next_id)
        step_ids = [next_id]
    return tokens[len(prompt):]


def test_greedy_generation_matches_transformers_generate(ours, reference):
    model, config = ours
    prompt = _prompt(12, config.vocab_size, seed=2)
    ours_tokens = _greedy(model, config, prompt.tolist(), 32)
    with torch.no_grad():
        ref = reference.generate(prompt[None], max_new_tokens=32, do_sample=False)[0, 12:].tolist()
    assert ours_tokens == ref
    assert len(set(ours_tokens)) > 8, "tiny model greedy output is degenerate"


def test_bf16_forward_matches_transformers_bf16(tiny_path, reference):
    """Same rounding points as transformers in bf16 (model-spec.md 5.2): bit-equal on this CPU, checked loosely."""
    model, config = load_model(tiny_path, dtype=torch.bfloat16, progress=False)
    hf = copy.deepcopy(reference).to(torch.bfloat16)
    # from_pretrained(dtype=bf16) keeps the rotary inv_freq buffer fp32; .to() would round it
    hf.model.rotary_emb.inv_freq = hf.model.rotary_emb.compute_default_rope_parameters(hf.config)[0]
    ids = _prompt(64, config.vocab_size, seed=3)
    cache = ModelCache(config, num_blocks=4, block_size=BLOCK_SIZE, num_slots=1, device="cpu", dtype=torch.bfloat16)
    logits = model(ForwardBatch.from_rows([(ids.tolist(), 0, 0, [3, 1, 0, 2], True)], BLOCK_SIZE), cache,
                   all_logits=True)
    with torch.no_grad():
        ref = hf(ids[None]).logits[0].float()
    err = _max_rel(logits, ref)
    print(f"max relative error vs transformers (64 tokens, bf16): {err:.3e}")
    assert err < 1e-2
    assert (logits.argmax(-1) == ref.argmax(-1)).float().mean() > 0.95
