"""Test support (runs in the test process): a scripted in-process Serving servicer and a small byte-level tokenizer."""
from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from typing import Optional

import grpc
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from proto import ADMITTED_METADATA_KEY, pb, pb_grpc
from proto.backlog import backlog_options
from proto.keepalive import server_options
from scheduler.repetition import ends_in_repetition, repetition_stop

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Like Qwen's tokenizer: the markup tokens are added but not "special", so they decode as text.
MARKUP_TOKENS = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
_CORPUS = ["Hello world, this is a test. The quick brown fox jumps over the lazy dog.",
           "assistant user system tool function parameter Paris weather sunny",
           "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12"] * 20
TEMPLATE_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "worker", "assets", "chat_template.jinja")


def read_template() -> str:
    """The Qwen3.8 chat template the project ships (worker/assets/chat_template.jinja)."""
    with open(TEMPLATE_PATH, encoding="utf-8") as f:
        return f.read()


def build_tokenizer() -> Tokenizer:
    """A byte-level BPE with the Qwen special tokens; CJK and emoji stay split over several byte tokens."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(_CORPUS, trainer=trainer)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    return tokenizer


@dataclass
class Script:
    """What the fake scheduler does with the next Generate calls."""
    reply: str = "Hello world"            # text generated (as tokens, one per message)
    token_ids: Optional[list] = None      # or exact ids
    delay_s: float = 0.0                  # between messages
    error: Optional[grpc.StatusCode] = None  # fail at once with this status
    error_details: str = ""
    abort_after: Optional[int] = None     # finish_reason "abort" after this many tokens
    max_running: Optional[int] = None     # RESOURCE_EXHAUSTED (a full queue) for a call beyond this many at once
    top_ids: list = field(default_factory=list)  # alternatives of every token (logprobs -1, -2, ..) when asked
    stop_id: Optional[int] = None         # the token that ends the reply (logprob -0.25); None = the eos
    cached_tokens: int = 0                # prompt tokens reported as prefix-cache hits (on the first message)
    first_delay_s: dict = field(default_factory=dict)  # choice index -> s queued before its first token
    say_admitted: bool = True             # send the admitted initial metadata, as the scheduler does
    requests: list = field(default_factory=list)  # GenerateRequests received


class FakeServing(pb_grpc.ServingServicer):
    """Serving with scripted output: emits Script.reply token by token, stops with eos or at max_tokens."""

    def __init__(self, tokenizer: Tokenizer, max_context_len: int = 256, template: Optional[str] = None):
        self.tokenizer = tokenizer
        self.max_context_len = max_context_len
        self.template = template if template is not None else read_template()
        self.eos_id = tokenizer.token_to_id("<|im_end|>")
        self.script = Script()
        self.generation_config = '{"temperature": 0.7}'   # the checkpoint's generation_config.json
        # The checkpoint's config.json: a Qwen3.5 one, whose text model's sizes are in text_config.
        self.config = ('{"model_type": "qwen3_5", "text_config": {"hidden_size": 64, "num_hidden_layers": 8, '
                       '"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, '
                       '"vocab_size": 1024}}')
        self.num_running = 0
        self.worker_alive = True
        self.device = "cuda:0 (fake)"   # the worker's device, as Load reports it
        self.max_num_seqs = 64
        self.num_prefix_resets = 0   # ResetPrefixCache calls taken
        self.load_fields: dict = {}  # more LoadResponse fields (num_waiting, the KV pool's blocks, block_size)
        self.model_path = ""         # Info's model_path: the checkpoint folder as the scheduler was given it

    async def Info(self, request, context):
        """A fixed model card: the test tokenizer, template, eos id and this fake's context length."""
        return pb.InfoResponse(model_id="fake-model", max_context_len=self.max_context_len,
                               tokenizer_json=self.tokenizer.to_str().encode(), chat_template=self.template,
                               eos_token_ids=[self.eos_id], generation_config_json=self.generation_config,
                               architecture="qwen3_5", quantization="bf16", num_parameters=1000,
                               vocab_size=self.tokenizer.get_vocab_size(), config_json=self.config,
                               model_path=self.model_path)

    async def Load(self, request, context):
        """A pb.LoadResponse from the fake's fields (num_running, worker_alive, device, load_fields)."""
        return pb.LoadResponse(num_running=self.num_running, worker_alive=self.worker_alive, device=self.device,
                               max_num_seqs=self.max_num_seqs, **self.load_fields)

    async def ResetPrefixCache(self, request, context):
        """Counts the reset (num_prefix_resets), or aborts with the script's error."""
        if self.script.error is not None:
            await context.abort(self.script.error, self.script.error_details or "scripted failure")
        self.num_prefix_resets += 1
        return pb.ResetPrefixCacheResponse()

    async def Generate(self, request, context):
        """Streams the script's answer for `request` (recorded in script.requests): its tokens, finish and timing, or
        the scripted error / refusal."""
        script = self.script
        script.requests.append(request)
        if script.error is not None:
            await context.abort(script.error, script.error_details or "scripted failure")
        if script.max_running is not None and self.num_running >= script.max_running:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "waiting queue is full")
        ids = script.token_ids if script.token_ids is not None else self.tokenizer.encode(script.reply).ids
        self.num_running += 1
        try:
            if script.say_admitted:
                await context.send_initial_metadata(((ADMITTED_METADATA_KEY, "1"),))
            async for message in self._messages(request, ids, script):
                yield message
        finally:
            self.num_running -= 1

    async def _messages(self, request, ids, script):
        queued = script.first_delay_s.get(_choice_index(request.req_id), 0)
        await asyncio.sleep(queued)
        limit = request.max_tokens or self.max_context_len - len(request.prompt_token_ids)
        # vLLM's repetition stop, as the scheduler applies it (scheduler/step_outputs.py).
        repeats, output = repetition_stop(request), []
        for i, token_id in enumerate(ids[:limit]):
            if script.delay_s:
                await asyncio.sleep(script.delay_s)
            if script.abort_after is not None and i >= script.abort_after:
                yield pb.GenerateResponse(finish_reason="abort", stop_token_id=-1)
                return
            last = i + 1 == limit
            output.append(token_id)
            repeated = repeats is not None and i + 1 >= request.sampling.min_tokens \
                and ends_in_repetition(output, repeats)
            message = pb.GenerateResponse(token_ids=[token_id], logprobs=[-0.5],
                                          finish_reason="length" if last else "repetition" if repeated else "",
                                          num_prompt_tokens=len(request.prompt_token_ids) if i == 0 else 0,
                                          num_generated_tokens=i + 1, stop_token_id=-1,
                                          num_cached_tokens=script.cached_tokens if i == 0 else 0,
                                          queue_time_ns=round(queued * 1e9) if i == 0 else 0)
            if request.sampling.num_logprobs:
                top = script.top_ids[:request.sampling.num_logprobs]
                message.top_logprobs.add(token_ids=top, logprobs=[-1.0 - j for j in range(len(top))])
            if i == 0 and request.sampling.prompt_logprobs:
                message.prompt_logprobs.CopyFrom(fake_prompt_logprobs(request))
            yield message
            if last or repeated:
                return
        stop_id = self.eos_id if script.stop_id is None else script.stop_id
        final = pb.GenerateResponse(finish_reason="stop", stop_token_id=stop_id, stop_token_logprob=-0.25,
                                    num_generated_tokens=min(len(ids), limit) + 1)
        if request.sampling.num_logprobs:
            top = ([stop_id] + script.top_ids)[:request.sampling.num_logprobs]
            final.stop_token_top_logprobs.token_ids.extend(top)
            final.stop_token_top_logprobs.logprobs.extend([-0.25 - j for j in range(len(top))])
        yield final


def _choice_index(req_id: str) -> int:
    """The choice a gateway req_id ("<request id>-<choice>") stands for; 0 for any other id."""
    tail = req_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def fake_prompt_logprobs(request) -> "pb.PromptLogprobs":
    """Scripted prompt logprobs: position i scores -0.1 * i at rank i; the alternatives are ids 0, 1, .. at -0.01 * j."""
    prompt = list(request.prompt_token_ids)
    out = pb.PromptLogprobs(first_position=1, token_ids=prompt[1:], logprobs=[-0.1 * i for i in range(1, len(prompt))],
                            ranks=list(range(1, len(prompt))))
    k = request.sampling.num_prompt_logprobs
    for _ in prompt[1:] if k else ():
        out.top_logprobs.add(token_ids=list(range(k)), logprobs=[-0.01 * j for j in range(k)])
    return out


# gRPC server options for test servers on port 0 (see start_fake_server), with the scheduler's keepalive policy
NO_REUSEPORT = [("grpc.so_reuseport", 0)] + server_options() + backlog_options()
# gRPC channel options for test clients of such servers: a channel of its own subchannels, as gateway.client's (a
# port reused from an earlier test's stopped server must not hand over that server's failed connection state)
LOCAL_SUBCHANNELS = [("grpc.use_local_subchannel_pool", 1)]


async def start_fake_server(servicer) -> tuple[grpc.aio.Server, str]:
    """Serves `servicer` (a FakeServing, or any Serving servicer: the scheduler's own in its tests) on a free
    loopback port; returns (server, 'host:port'). Without SO_REUSEPORT, as the real scheduler binds
    (scheduler/server.py): with it, a port another process's server holds is not a conflict to the kernel, so test
    runs side by side are not kept apart by the bind alone."""
    server = grpc.aio.server(options=NO_REUSEPORT)
    pb_grpc.add_ServingServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def start_test_client(app, **session_kwargs):
    """An aiohttp TestClient serving `app` as production does (http_server.GatewayRunner: its protocol and
    server options)."""
    from aiohttp.test_utils import TestClient, TestServer

    from gateway.http_server import GatewayRunner

    class GatewayTestServer(TestServer):
        async def _make_runner(self, **kwargs):
            return GatewayRunner(self.app, **kwargs)

    server = GatewayTestServer(app)
    await server.start_server()
    client = TestClient(server, **session_kwargs)
    await client.start_server()
    return client


@contextlib.asynccontextmanager
async def fake_gateway(fake: FakeServing, **config):
    """The real gateway app over `fake` on loopback; yields (aiohttp TestClient, fake); `config` are GatewayConfig
    fields besides scheduler_addr (e.g. sse_keepalive_s). Stops client and server after."""
    from gateway.app import create_app
    from gateway.client import SchedulerClient
    from gateway.config import GatewayConfig

    server, addr = await start_fake_server(fake)
    client = await start_test_client(create_app(GatewayConfig(scheduler_addr=addr, **config), SchedulerClient(addr)))
    try:
        yield client, fake
    finally:
        await client.close()
        await server.stop(None)
