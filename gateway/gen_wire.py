"""Gateway process: a GenRequest's choice as the scheduler's pb.GenerateRequest (sampling params, prompt, limits,
constraint)."""
from __future__ import annotations

from typing import Optional

from gateway.gen_request import GenRequest
from proto import pb

# SamplingParams floats are float32, where a tiny positive value becomes 0, which the wire reads as "off". The least
# values sent instead filter alike: a top_p below 1e-9 keeps only the most likely token as 1e-9 does (the next one
# has more mass than that), and float32's least normal number is the strongest repetition_penalty it can carry.
_LEAST_TOP_P = 1e-9
_LEAST_REPETITION_PENALTY = 1.1754943508222875e-38
_LEAST_VLLM_TEMPERATURE = 0.01


_FILTERS = {"temperature": pb.SamplingParams.FILTER_TEMPERATURE, "top_k": pb.SamplingParams.FILTER_TOP_K,
            "top_p": pb.SamplingParams.FILTER_TOP_P, "min_p": pb.SamplingParams.FILTER_MIN_P,
            "typ_p": pb.SamplingParams.FILTER_TYPICAL_P, "xtc": pb.SamplingParams.FILTER_XTC,
            "top_n_sigma": pb.SamplingParams.FILTER_TOP_N_SIGMA}
_CHAINS = {"vllm": pb.SamplingParams.CHAIN_VLLM, "ollama": pb.SamplingParams.CHAIN_OLLAMA,
           "llama.cpp": pb.SamplingParams.CHAIN_LLAMA_CPP}


def _filter_order(names: Optional[list]) -> list:
    """The wire's filter_order: [] when no order was sent, [FILTER_NONE] for an empty one (no filter runs)."""
    if names is None:
        return []
    return [_FILTERS[name] for name in names] or [pb.SamplingParams.FILTER_NONE]


def _temperature(s) -> float:
    """vLLM raises a positive temperature below 0.01 to 0.01 (SamplingParams.__post_init__, _MAX_TEMP: smaller ones
    overflow), so 0.001 or 1e-6 sample at 0.01 rather than being greedy; only 0 is. llama.cpp and Ollama take it."""
    if s.chain == "vllm" and 0 < s.temperature < _LEAST_VLLM_TEMPERATURE:
        return _LEAST_VLLM_TEMPERATURE
    return s.temperature


def _positive(value: float, least: float) -> float:
    return max(value, least) if value > 0 else value


def generate_request(req: GenRequest, index: int) -> "pb.GenerateRequest":
    """Choice `index` of req (its prompt index // n, seed + index % n) as the scheduler's GenerateRequest."""
    s = req.sampling
    sampling = pb.SamplingParams(
        temperature=_temperature(s), top_p=_positive(s.top_p, _LEAST_TOP_P), top_k=s.top_k, min_p=s.min_p,
        typical_p=_positive(s.typical_p, _LEAST_TOP_P) if s.typical_p > 0 else _LEAST_TOP_P,
        has_seed=s.seed is not None, seed=((s.seed or 0) + index % req.n) % (1 << 64),
        presence_penalty=s.presence_penalty, frequency_penalty=s.frequency_penalty,
        repetition_penalty=_positive(s.repetition_penalty, _LEAST_REPETITION_PENALTY),
        repetition_window=s.repetition_window, logit_bias=dict(s.logit_bias),
        allowed_token_ids=list(s.allowed_token_ids), bad_words=[pb.TokenIds(ids=ids) for ids in s.bad_words],
        num_logprobs=req.num_logprobs or 0, min_tokens=s.min_tokens,
        prompt_logprobs=req.num_prompt_logprobs is not None, num_prompt_logprobs=req.num_prompt_logprobs or 0,
        chain=_CHAINS[s.chain], filter_order=_filter_order(s.filter_order), min_keep=s.min_keep,
        post_sampling_probs=s.post_sampling, xtc_probability=s.xtc_probability, xtc_threshold=s.xtc_threshold,
        dry_multiplier=s.dry_multiplier, dry_base=s.dry_base, dry_allowed_length=s.dry_allowed_length,
        dry_penalty_last_n=s.dry_penalty_last_n, top_n_sigma=s.top_n_sigma, dynatemp_range=s.dynatemp_range,
        dynatemp_exponent=s.dynatemp_exponent, mirostat=s.mirostat, mirostat_tau=s.mirostat_tau,
        mirostat_eta=s.mirostat_eta,
        dry_sequence_breakers=[pb.TokenIds(ids=ids) for ids in s.dry_breaker_ids])
    prompt_ids = req.all_prompt_ids[index // req.n]
    constraint = None
    if req.constraint is not None:
        constraint = pb.Constraint(kind=req.constraint.kind, grammar=req.constraint.grammar)
    return pb.GenerateRequest(req_id=f"{req.req_id}-{index}", prompt_token_ids=prompt_ids,
                              sampling=sampling, max_tokens=req.max_tokens_of(index // req.n),
                              stop_token_ids=req.stop_token_ids, ignore_eos=req.ignore_eos, constraint=constraint,
                              group_id=req.req_id, cache_salt=req.cache_salt,
                              priority=req.priority, max_repetition_pattern_size=req.repetition_stop[0],
                              min_repetition_pattern_size=req.repetition_stop[1],
                              repetition_min_count=req.repetition_stop[2])
