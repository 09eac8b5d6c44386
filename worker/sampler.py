"""Worker process: batched sampling of one packed step's logits; every kind of request shares the same batch.

Order per row, as vLLM's v1 Sampler and llama.cpp's chain: logit_bias, then the penalties (repetition, then
frequency/presence) on the raw logits; greedy rows take the argmax; the others run temperature, min_p, top_k, top_p
and typical_p in their API's order (worker/sampling_chain.py) and pick argmax(probs / E) with E ~ Exponential(1) noise
(the Gumbel-max trick in exponential form). A seeded row
draws its noise for token i from a generator seeded with mix(seed, i) only, so its tokens do not depend on
the rest of the batch and a preempted request resumes with the same tokens. Logprobs are the model's
(log_softmax of the raw logits, before penalties and temperature), as vLLM reports by default.
Rows with allowed_token_ids (vLLM's) have every other token masked after logit_bias, as vLLM's allowed-token mask,
and the tokens that would complete one of their bad_words (vLLM's) too.
Rows below their min_tokens have their eos / stop ids masked after logit_bias.
Constrained rows (worker/grammar.py) have the tokens their grammar forbids masked after logit_bias and
consume the token they sampled; unconstrained batches skip both.
"""
import os
from dataclasses import dataclass, field

import torch

from proto import pb
from worker.batch import to_device
from worker.dry import apply_dry, dry_on
from worker.grammar import apply_grammars, consume_sampled
from worker.sampling_chain import filter_probs as _filter, note_draws

GREEDY_EPS = 1e-5
MASK = float("-inf")


def mix_seed(seed: int, index: int) -> int:
    """splitmix64 of (seed, index) -> a 63-bit generator seed; depends on nothing else."""
    x = (seed * 0x9E3779B97F4A7C15 + index + 1) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (x ^ (x >> 31)) & 0x7FFFFFFFFFFFFFFF


@dataclass
class SamplingState:
    """One request's sampling parameters and the tokens its penalties look at."""

    req_id: str
    params: object                  # pb.SamplingParams
    prompt_token_ids: list
    output_token_ids: list = field(default_factory=list)
    grammar: object = None          # worker.grammar.RequestGrammar, None when unconstrained
    min_tokens_stop_ids: tuple = () # eos + stop ids masked while len(output_token_ids) < params.min_tokens
    prompt_carry: object = None     # [V] f32 logprobs at the last position of the previous prefill chunk, kept
                                    # while params.prompt_logprobs and more prompt follows (worker/prompt_logprobs.py)
    dry_breakers: object = None     # {head: [tails]} of params.dry_sequence_breakers, read once (worker/dry.py)
    mirostat_mu: object = None      # mirostat's target surprise, and the device probability of its last draw
    mirostat_drawn: object = None   # (worker/mirostat.py)

    @property
    def is_greedy(self) -> bool:
        """Temperature below GREEDY_EPS: the argmax, no random draw."""
        return self.params.temperature < GREEDY_EPS

    @property
    def has_penalty(self) -> bool:
        """Any of presence, frequency or repetition penalty is set (repetition 0 or 1: none)."""
        p = self.params
        return p.presence_penalty != 0 or p.frequency_penalty != 0 or p.repetition_penalty not in (0.0, 1.0)

    @property
    def is_plain_greedy(self) -> bool:
        """Argmax of the raw logits: greedy with nothing that edits the logits (penalty, bias, grammar, min_tokens)."""
        p = self.params
        return (self.is_greedy and not self.has_penalty and not dry_on(p) and not p.logit_bias and self.grammar is None
                and not p.allowed_token_ids and not p.bad_words and len(self.output_token_ids) >= p.min_tokens)


@dataclass
class SampleOutput:
    token_ids: list                 # [M] sampled ids
    logprobs: list                  # [M] natural-log probability of each
    top_logprobs: list              # [M] (ids, logprobs) or None where num_logprobs == 0


# Chains whose frequency/presence penalties count the repetition window's prompt+output tokens: llama.cpp's penalties
# sampler (its server accepts every prompt token into it) and Ollama's sample.Sampler (its runner Accept()s the
# prompt's tokens into the history it counts), where vLLM counts the output only.
_WINDOW_COUNTED = (pb.SamplingParams.CHAIN_LLAMA_CPP, pb.SamplingParams.CHAIN_OLLAMA)


def _apply_penalties(logits: torch.Tensor, states: list) -> None:
    """In place on logits [M, V]: repetition penalty over prompt+output (its last repetition_window tokens when set),
    then frequency/presence over the output (vLLM's apply_penalties), or over that same window of prompt+output for
    llama.cpp's and Ollama's chains (_WINDOW_COUNTED)."""
    vocab = logits.shape[1]
    for r, st in enumerate(states):
        if not st.has_penalty:
            continue
        p = st.params
        window = st.prompt_token_ids + st.output_token_ids
        if p.repetition_window:
            window = window[-p.repetition_window:]
        if p.repetition_penalty not in (0.0, 1.0):
            seen = to_device(window, logits.device, torch.int64).unique()
            seen = seen[seen < vocab]
            vals = logits[r, seen]
            # A penalty near float32's least number would make a positive logit inf (and the probabilities NaN).
            limit = torch.finfo(logits.dtype).max
            logits[r, seen] = torch.where(vals > 0, vals / p.repetition_penalty,
                                          vals * p.repetition_penalty).clamp(-limit, limit)
        counted = window if p.chain in _WINDOW_COUNTED else st.output_token_ids
        if counted and (p.frequency_penalty or p.presence_penalty):
            ids = to_device(counted, logits.device, torch.int64)
            counts = torch.bincount(ids[ids < vocab], minlength=vocab)[:vocab].to(logits.dtype)
            logits[r] -= p.frequency_penalty * counts + p.presence_penalty * (counts > 0).to(logits.dtype)


def _apply_logit_bias(logits: torch.Tensor, states: list) -> None:
    rows, ids, values = [], [], []
    for r, st in enumerate(states):
        for token_id, bias in st.params.logit_bias.items():
            if token_id < logits.shape[1]:
                rows.append(r)
                ids.append(token_id)
                values.append(bias)
    if rows:
        dev = logits.device
        logits.index_put_((to_device(rows, dev, torch.int64), to_device(ids, dev, torch.int64)),
                          to_device(values, dev, logits.dtype), accumulate=True)


def _mask_disallowed(logits: torch.Tensor, states: list) -> None:
    """In place: every token outside a row's allowed_token_ids to -inf (rows without the list are left alone)."""
    for r, st in enumerate(states):
        if st.params.allowed_token_ids:
            allowed = to_device([t for t in st.params.allowed_token_ids if 0 <= t < logits.shape[1]], logits.device,
                                torch.long)
            kept = logits[r, allowed].clone()
            logits[r] = MASK
            logits[r, allowed] = kept


def _mask_bad_words(logits: torch.Tensor, states: list) -> None:
    """In place: the last token of each of a row's bad words whose other tokens end its output so far to -inf
    (vllm/v1/sample/ops/bad_words.py; a one-token word always)."""
    for r, st in enumerate(states):
        out = st.output_token_ids
        banned = [w.ids[-1] for w in st.params.bad_words
                  if w.ids and len(w.ids) - 1 <= len(out) and out[len(out) - len(w.ids) + 1:] == list(w.ids[:-1])]
        banned = [t for t in banned if 0 <= t < logits.shape[1]]
        if banned:
            logits[r, to_device(banned, logits.device, torch.long)] = MASK


def _mask_stop_ids(logits: torch.Tensor, states: list) -> None:
    """In place: eos / stop ids to -inf for rows that have generated fewer than min_tokens tokens. Runs after the
    grammar masks: a row whose grammar allows only those ids (its output is complete) keeps them, so the
    grammar wins over min_tokens instead of leaving nothing to sample."""
    for r, st in enumerate(states):
        if st.min_tokens_stop_ids and len(st.output_token_ids) < st.params.min_tokens:
            ids = [t for t in st.min_tokens_stop_ids if 0 <= t < logits.shape[1]]
            valid = to_device(ids, logits.device, torch.long)
            kept = logits[r, valid].clone()
            logits[r, valid] = MASK
            if not bool((logits[r] > MASK).any()):
                logits[r, valid] = kept


def _post_sampling(raw_logprobs: torch.Tensor, token_ids: torch.Tensor, states: list, probs, sampled_rows: list):
    """The log-distribution [M, V] each row's logprobs are read from: the raw one, but for a row with
    post_sampling_probs (llama.cpp's) the distribution its token was drawn from: a sampled row's filtered probabilities
    (probs: [len(sampled_rows), V], after bias, masks, penalties, grammar, filters and temperature; filtered tokens
    -inf), a greedy row's argmax at log 1 = 0 and every other token at -inf."""
    post = [r for r, st in enumerate(states) if st.params.post_sampling_probs]
    if not post:
        return raw_logprobs
    dist = raw_logprobs.clone()
    where = {row: i for i, row in enumerate(sampled_rows)}
    for r in post:
        if r in where:
            dist[r] = probs[where[r]].log()
        else:
            dist[r] = float("-inf")
            dist[r, token_ids[r]] = 0.0
    return dist


def _noise(states: list, vocab: int, generator: torch.Generator) -> torch.Tensor:
    """Exponential(1) noise [R, V] on the generator's device; seeded rows from (seed, token index) only (a generator
    of that device per row: the same tokens whatever the batch, per device type)."""
    dev = generator.device
    noise = torch.empty(len(states), vocab, device=dev).exponential_(generator=generator)
    for r, st in enumerate(states):
        if st.params.has_seed:
            row_gen = torch.Generator(device=dev).manual_seed(mix_seed(st.params.seed, len(st.output_token_ids)))
            noise[r] = torch.empty(vocab, device=dev).exponential_(generator=row_gen)
    return noise


class Sampler:
    def __init__(self, vocab_size: int, seed: int = 0, grammars=None):
        self.vocab_size = vocab_size
        self.grammars = grammars        # worker.grammar.GrammarBook, or None (no constrained requests)
        # Unseeded rows draw from one worker generator per device (different on every worker start unless seed given).
        self.seed = seed or int.from_bytes(os.urandom(7), "little")
        self.generator = torch.Generator().manual_seed(self.seed)
        self._generators = {torch.device("cpu"): self.generator}

    def _generator(self, device: torch.device) -> torch.Generator:
        if device not in self._generators:
            self._generators[device] = torch.Generator(device=device).manual_seed(self.seed)
        return self._generators[device]

    def sample(self, logits: torch.Tensor, states: list) -> SampleOutput:
        """logits [M, V'] float32 (V' >= vocab_size; padded LM rows are never sampled) for `states` [M]."""
        return self.collect(self.launch(logits, states))

    def launch(self, logits: torch.Tensor, states: list) -> "SampleLaunch":
        """The sampling math queued on the logits' device, not waited for: the ids [M] int64 stay there (the next
        pipelined step's previous_token rows read them) until collect()."""
        if all(st.is_plain_greedy for st in states):
            return self._launch_greedy(logits[:, :self.vocab_size], states)
        # On the logits' device: [M, V] never crosses to the host (at M = 64, V = 248K: 64 MB a step, and the host's
        # filtering took 1.35 s on 2 CPU threads at temperature 0.7 / top_p 0.8 / top_k 20, against ~22 ms of GPU
        # forward); only the [M] ids and logprobs do
        logits = logits[:, :self.vocab_size].float()
        raw_logprobs = logits.log_softmax(dim=-1)
        logits = logits.clone()
        _apply_logit_bias(logits, states)
        _mask_disallowed(logits, states)
        _mask_bad_words(logits, states)
        _apply_penalties(logits, states)
        apply_dry(logits, states)
        constrained = apply_grammars(self.grammars, logits, states) if self.grammars is not None else []
        _mask_stop_ids(logits, states)
        token_ids = logits.argmax(dim=-1)
        sampled_rows = [r for r, st in enumerate(states) if not st.is_greedy]
        if sampled_rows:
            sub = [states[r] for r in sampled_rows]
            rows = to_device(sampled_rows, logits.device, torch.int64)
            probs = _filter(logits[rows], sub)
            picked = (probs / _noise(sub, probs.shape[1], self._generator(probs.device))).argmax(dim=-1)
            note_draws(probs, picked, sub)
            token_ids[rows] = picked
        dist = _post_sampling(raw_logprobs, token_ids, states, probs if sampled_rows else None, sampled_rows)
        logprobs = dist.gather(1, token_ids[:, None])[:, 0]
        return SampleLaunch(token_ids, logprobs, self._top(dist, states), constrained)

    def _launch_greedy(self, logits: torch.Tensor, states: list) -> "SampleLaunch":
        """All rows plain greedy: argmax and logprobs where the logits are (the GPU), so only [M] ids, [M] logprobs
        and the asked-for top logprobs cross to the host, not [M, V] logits (64 MB at M = 64, V = 248K)."""
        raw_logprobs = logits.float().log_softmax(dim=-1)
        token_ids = raw_logprobs.argmax(dim=-1)
        dist = _post_sampling(raw_logprobs, token_ids, states, None, [])
        logprobs = dist.gather(1, token_ids[:, None])[:, 0]
        return SampleLaunch(token_ids, logprobs, self._top(dist, states), [])

    @staticmethod
    def collect(launched: "SampleLaunch") -> SampleOutput:
        """Waits for a launch's ids and logprobs (the host copies when to_host ran: wait for the stream up to them
        first); constrained rows consume their token."""
        token_ids, logprobs, top_parts = launched.host or (launched.token_ids, launched.logprobs, launched.top)
        sampled = token_ids.tolist()
        consume_sampled(launched.constrained, sampled)
        top = [None] * len(sampled)
        if top_parts is not None:
            wanted, values, ids = top_parts
            values, ids = values.tolist(), ids.tolist()
            top = [(ids[r][:k], values[r][:k]) if k else None for r, k in enumerate(wanted)]
        return SampleOutput(sampled, logprobs.tolist(), top)

    @staticmethod
    def _top(raw_logprobs: torch.Tensor, states: list):
        """(wanted [M], values, ids [M, max wanted]) on the device, or None when no row asks for top logprobs."""
        wanted = [st.params.num_logprobs for st in states]
        if not any(wanted):
            return None
        values, ids = raw_logprobs.topk(min(max(wanted), raw_logprobs.shape[1]), dim=-1)
        return wanted, values, ids


@dataclass
class SampleLaunch:
    """Sampler.launch's queued results, on the logits' device until Sampler.collect."""

    token_ids: torch.Tensor         # [M] int64
    logprobs: torch.Tensor          # [M] float32
    top: object                     # None, or (wanted [M] ints, values [M, k], ids [M, k])
    constrained: list               # what consume_sampled needs (worker/grammar.py)
    host: tuple = None              # (token_ids, logprobs, top) copied to pinned host memory by to_host

    def to_host(self) -> None:
        """Queues the copies of the results to pinned host memory, ordered on the stream before whatever is queued
        after, so that waiting for them (an event recorded next) does not wait for the step launched behind (a
        plain .tolist() would: its copy would queue after that step)."""
        top = None if self.top is None else (self.top[0], _to_host(self.top[1]), _to_host(self.top[2]))
        self.host = (_to_host(self.token_ids), _to_host(self.logprobs), top)


def _to_host(t: torch.Tensor) -> torch.Tensor:
    if not t.is_cuda:
        return t
    out = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    return out.copy_(t, non_blocking=True)
