"""bench/serve_http.py's pieces on CPU: the vLLM-style metric math on hand-made timings, the decode roofline, and the
random 27B-shaped checkpoint writer (a scaled-down 4-layer one loaded by the worker's loader)."""
import json
import math
import os

import pytest
import torch
from tokenizers import Tokenizer

from bench import serve_ckpt
from bench.gpu_model import config_27b
from bench.serve_http import parse_args
from bench.serve_metrics import RequestResult, add_roofline, format_table, summarize
from kernels.nvfp4.checkpoint import NVFP4Weight
from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.config import ModelConfig
from worker.loader import load_model


def _request(start, chunks, end, tokens, ok=True):
    return RequestResult(ok=ok, start=start, end=end, chunk_times=list(chunks), output_tokens=tokens)


def test_summarize_pools_itl_and_interpolates_percentiles():
    # request A: TTFT 0.1 s, chunk gaps 0.2 and 0.4, E2E 0.8 s; B: TTFT 0.3 s, one gap 0.1, E2E 0.5 s
    results = [_request(0.0, [0.1, 0.3, 0.7], 0.8, 3), _request(1.0, [1.3, 1.4], 1.5, 2),
               _request(2.0, [], 2.1, 0, ok=False)]
    row = summarize(2, results, wall_s=2.5)
    assert (row["requests"], row["failed"], row["output_tokens"]) == (2, 1, 5)
    assert row["output_tok_s"] == pytest.approx(5 / 2.5)
    assert row["req_s"] == pytest.approx(2 / 2.5)
    assert row["ttft_median_ms"] == pytest.approx(200.0)
    assert row["ttft_p99_ms"] == pytest.approx(100 + 0.99 * 200)
    # ITL pooled over both requests: [0.2, 0.4, 0.1] -> median 0.2, p99 between 0.2 and 0.4 at 0.98 of the way
    assert row["itl_median_ms"] == pytest.approx(200.0)
    assert row["itl_p99_ms"] == pytest.approx(200 + 0.98 * 200)
    # TPOT: A (0.8 - 0.1) / 2 = 0.35, B (0.5 - 0.3) / 1 = 0.2
    assert row["tpot_median_ms"] == pytest.approx(275.0)
    assert row["e2e_median_ms"] == pytest.approx(650.0)


def test_roofline_counts_weights_state_conv_and_kv():
    config = config_27b(64)
    row = add_roofline({"C": 8, "output_tok_s": 400.0}, config, weight_bytes=14_000_000_000, state_size=4,
                       context=576, bandwidth=4.0e12)
    state = 2 * 48 * 8 * (48 * 128 * 128) * 4
    conv = 2 * 48 * 8 * 10240 * 3 * 2
    kv = 16 * 8 * (576 + 2) * (2 * 4 * 256 * 2)
    step = 14_000_000_000 + state + conv + kv
    assert row["step_gb"] == pytest.approx(step / 1e9)
    assert row["roofline_tok_s"] == pytest.approx(8 / (step / 4.0e12))
    assert row["roofline_frac"] == pytest.approx(400.0 / row["roofline_tok_s"])
    no_bw = add_roofline({"C": 8, "output_tok_s": 400.0}, config, 14_000_000_000, 4, 576, None)
    assert math.isnan(no_bw["roofline_tok_s"]) and "| - | - |" in format_table([dict(summarize(8, [], 1.0),
                                                                                        **no_bw)])


def test_27b_text_config_is_the_design_shape():
    base = {"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25}, "hidden_act": "silu"}
    text = serve_ckpt.text_config_27b(base, 64, serve_ckpt.VOCAB_27B)
    parsed = ModelConfig.from_dict(dict(text, model_type="qwen3_5_text"))
    expected = config_27b(64)
    for field in ("vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                  "head_dim", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                  "linear_value_head_dim", "linear_conv_kernel_dim", "layer_types"):
        assert getattr(parsed, field) == getattr(expected, field), field
    assert (len(parsed.gdn_layer_ids), len(parsed.attention_layer_ids)) == (48, 16)
    with pytest.raises(ValueError):
        serve_ckpt.text_config_27b(base, 4, 1024, shrink=3)  # 5120 / 3 is no multiple of 16


def test_random_fill_tiles_the_pool_from_an_offset(monkeypatch):
    monkeypatch.setattr(serve_ckpt, "POOL_ELEMENTS", 64)
    fill = serve_ckpt.RandomFill(seed=3)
    out = fill.tile(fill.codes, (10, 20))
    flat, idx = out.reshape(-1), torch.arange(200)
    # 200 elements from a 64-element pool: one offset, wrapping around three times
    assert sum(torch.equal(flat, fill.codes[(start + idx) % 64]) for start in range(64)) >= 1
    scales = fill.nvfp4((32, 64))["weight_scale"].float()
    assert scales.shape == (32, 4) and scales.min() >= 0.5 and scales.max() <= 2.0


@pytest.fixture(scope="module")
def small_27b(tmp_path_factory):
    """A 4-layer (3 GDN + 1 attention) 27B-shaped NVFP4 checkpoint with widths / 16 and a 2048-row vocabulary."""
    out = str(tmp_path_factory.mktemp("ckpt") / "27b")
    serve_ckpt.make_checkpoint(out, "27b", num_layers=4, quant="nvfp4", shrink=16, vocab=2048)
    return out


def test_written_checkpoint_loads_and_gives_finite_logits(small_27b):
    model, config = load_model(small_27b, progress=False)
    assert (config.vocab_size, config.hidden_size, config.intermediate_size) == (2048, 320, 1088)
    assert config.layer_types == ["linear_attention"] * 3 + ["full_attention"]
    assert isinstance(model.lm_head.nvfp4, NVFP4Weight)
    cache = ModelCache(config, 4, 16, 2, device="cpu", dtype=torch.float32)
    batch = ForwardBatch.from_rows([([5, 17, 300, 9, 1000, 12], 0, 0, [0], True)], 16)
    logits = model.run(model.prepare(batch, 16), cache, batch.last_token_index())[0]
    assert torch.isfinite(logits).all()
    # tokens that decode to whole characters get O(1) random logits; every other LM-head row is zero
    tokenizer = Tokenizer.from_file(os.path.join(small_27b, "tokenizer.json"))
    keep = serve_ckpt.text_rows(tokenizer, 2048)
    assert 600 < int(keep.sum()) < 1015 and not keep[1015:].any()  # 760: the lone UTF-8 bytes go
    assert not keep[tokenizer.token_to_id("<|im_end|>")] and keep[tokenizer.token_to_id("H")]
    assert 0.2 < logits[keep].std().item() < 5.0
    assert logits[~keep].abs().max().item() == 0.0 and keep[int(logits.argmax())]


def test_written_checkpoint_layout_and_weight_bytes(small_27b):
    with open(os.path.join(small_27b, "config.json"), encoding="utf-8") as f:
        raw = json.load(f)
    qc = raw["quantization_config"]
    assert qc["quant_method"] == "modelopt" and "model.language_model.layers.0.linear_attn.in_proj_a" in qc["ignore"]
    config = ModelConfig.from_dict(raw)
    num_bytes = serve_ckpt.linear_weight_bytes(small_27b, config)
    d, inter, gdn_ab = 320, 1088, 2 * 48 * 320 * 2
    gdn = (10240 * d + 6144 * d + d * 6144) * 9 // 16 + gdn_ab
    attn = (12288 * d + 2 * 1024 * d + d * 6144) * 9 // 16
    mlp = 3 * d * inter * 9 // 16
    assert num_bytes == 3 * gdn + attn + 4 * mlp + 2048 * d * 9 // 16


def test_checkpoint_is_reused_and_a_foreign_folder_refused(small_27b, tmp_path):
    shard = os.path.join(small_27b, "model-00001.safetensors")
    before = os.path.getmtime(shard)
    serve_ckpt.make_checkpoint(small_27b, "27b", num_layers=4, quant="nvfp4", shrink=16, vocab=2048)
    assert os.path.getmtime(shard) == before
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not a folder the bench wrote"):
        serve_ckpt.make_checkpoint(str(tmp_path), "tiny")
    assert (tmp_path / "mine.txt").read_text() == "keep me"


def test_parse_args_levels_and_defaults():
    args = parse_args(["--concurrency", "1, 8,32", "--input-len", "16"])
    assert args.levels == [1, 8, 32] and args.num_prompts == 0 and args.output_len == 128
    with pytest.raises(SystemExit):
        parse_args(["--concurrency", "0"])
