"""Scheduler process: one request's state as the scheduler tracks it (tokens, slot, blocks, timings)."""
from dataclasses import dataclass, field

WAITING, RUNNING, FINISHED = "waiting", "running", "finished"


@dataclass(eq=False)
class Request:
    """A generation request. `sampling` is the pb.SamplingParams forwarded untouched to the worker."""

    req_id: str
    prompt_token_ids: list
    sampling: object
    max_tokens: int                       # 0 = until the context is full
    stop_token_ids: frozenset = frozenset()
    eos_token_ids: frozenset = frozenset()  # empty when the request ignores eos
    arrival_ns: int = 0                   # monotonic ns when admitted
    output_token_ids: list = field(default_factory=list)
    num_computed_tokens: int = 0          # tokens already in KV / GDN state on the worker
    state_slot: int = -1
    block_ids: list = field(default_factory=list)
    num_blocks_sent: int = 0              # of block_ids, those the worker holds in state_slot's table (0: none)
    status: str = WAITING
    sent_to_worker: bool = False          # the worker holds this request's sampling state
    first_scheduled_ns: int = 0
    first_token_ns: int = 0
    last_token_ns: int = 0
    finish_reason: str = ""
    stop_token_id: int = -1
    constraint: object = None             # pb.Constraint forwarded untouched to the worker (None = unconstrained)
    cache_salt: str = ""                  # vLLM's cache_salt: prefix-cache entries are shared within one salt only
    priority: int = 0                     # vLLM's: a lower value is admitted first and preempted last
    num_cached_tokens: int = 0            # prompt tokens served from the prefix cache at its first admission
    num_preemptions: int = 0              # times preempted (recompute) so far
    # vLLM's stop on a repeated token pattern (scheduler/repetition.py); None = off.
    repetition_stop: object = None
    # Prefix-cache plan (scheduler/prefix_cache.py), made when first scheduled (None = not yet): prefill chunks end
    # at split_points, snapshots are taken at snapshot_points (prefix lengths in tokens, ascending).
    split_points: list = None
    snapshot_points: tuple = ()
    checkpoint_grid: bool = False         # the plan is a grid's (an anchorless prompt), not its anchors'
    # SamplingParams.prompt_logprobs: positions gathered so far (scheduler/prompt_logprobs.py) and whether the first
    # response carried them.
    prompt_logprobs: object = None        # pb.PromptLogprobs from position 1
    prompt_logprobs_sent: bool = False

    @property
    def min_tokens(self) -> int:
        """Generated tokens before an eos / stop token may end the request (0 = off)."""
        return self.sampling.min_tokens

    @property
    def min_tokens_stop_ids(self) -> list:
        """The ids the worker masks while fewer than min_tokens were generated (none when min_tokens is 0)."""
        return sorted(self.stop_token_ids | self.eos_token_ids) if self.min_tokens > 0 else []

    @property
    def num_prompt_tokens(self) -> int:
        """Tokens of the prompt."""
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens."""
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def num_uncomputed_tokens(self) -> int:
        """Tokens (prompt and output) not yet run through the model."""
        return self.num_tokens - self.num_computed_tokens

    @property
    def is_decoding(self) -> bool:
        """Past its prompt: only its last sampled token is left to run."""
        return self.num_uncomputed_tokens == 1 and bool(self.output_token_ids)

    def take_block_table(self) -> tuple:
        """(start, ids) for this request's next StepRow (block_table_start, block_table): the ids it gained since its
        last row in its slot, or its whole table (start 0) when the worker holds none; those are then counted sent.
        vLLM's scheduler sends a request's block ids once and then new_block_ids (vllm/v1/core/sched/output.py)."""
        start, block_ids = self.num_blocks_sent, self.block_ids
        self.num_blocks_sent = len(block_ids)
        return start, block_ids[start:] if start else block_ids

    def token_slice(self, start: int, end: int) -> list:
        """Tokens [start, end) of prompt + output without concatenating the whole sequence."""
        num_prompt = len(self.prompt_token_ids)
        if start >= num_prompt:
            return self.output_token_ids[start - num_prompt:end - num_prompt]
        if end <= num_prompt:
            return self.prompt_token_ids[start:end]
        return self.prompt_token_ids[start:] + self.output_token_ids[:end - num_prompt]


@dataclass(slots=True)
class RequestOutput:
    """What one step produced for one request: new tokens and, at the end, why it finished."""

    req_id: str
    token_ids: list = field(default_factory=list)
    logprobs: list = field(default_factory=list)
    top_logprobs: list = field(default_factory=list)  # pb.TopLogprobs per token
    finish_reason: str = ""               # "", "stop", "length", "abort", "error"
    stop_token_id: int = -1
    stop_token_logprob: float = 0.0       # with stop_token_id >= 0: its natural-log probability
    stop_top_logprobs: object = None      # with stop_token_id >= 0 and num_logprobs > 0: pb.TopLogprobs at its position
    error: str = ""                       # non-empty: the request failed (worker error)
    invalid: bool = False                 # the failure is the request's own (INVALID_ARGUMENT), not the step's
    prompt_logprobs: object = None        # pb.PromptLogprobs of the whole prompt, on the first output only

    def stop_on(self, token_id: int, logprob: float, top) -> "RequestOutput":
        """This output as the request's end on an eos / stop token: the token is not part of the text, but it was
        generated, so its logprob (and its position's top tokens, `top`, when asked) go back with the finish, as vLLM
        returns them."""
        self.finish_reason, self.stop_token_id = "stop", token_id
        self.stop_token_logprob, self.stop_top_logprobs = logprob, top
        return self
