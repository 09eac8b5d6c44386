"""Bench helper (bench/scheduler_host.py): an in-process worker link that answers every step at once.

The scheduler's side of the wire is real: each WorkerMessage is serialized as WorkerLink.send serializes it, and each
answer is a frame the engine parses as WorkerLink.recv does. The worker's side (parsing the step, sampling, building
the result) is timed apart (CPU time of the loop's thread), in `worker_ns`, so that the bench subtracts it: what remains is the scheduler's host time.
Sampled tokens stay in [3, vocab - 16), clear of the ids the bench uses as eos / stop tokens unless `stop_every` says.
"""
import asyncio
import time

from proto import pb
from proto.frames import decode, encode


class InstantLink:
    def __init__(self, hello: "pb.WorkerHello", vocab: int, stop_token: int = -1, stop_every: int = 0):
        self.hello, self.vocab = hello, vocab
        self.stop_token, self.stop_every = stop_token, stop_every
        self.inbox = asyncio.Queue()
        self.worker_ns = 0          # time spent playing the worker (not the scheduler's)
        self.num_steps = 0
        self.serving_gone = False   # WorkerLink's: this link's worker never disconnects
        self.num_logprobs = {}      # req_id -> SamplingParams.num_logprobs, from NewRequest

    def send(self, msg) -> bool:
        frame = encode(msg)                     # the scheduler's cost, as WorkerLink.send
        t0 = time.thread_time_ns()
        answer = self._answer(frame)
        if answer is not None:
            self.inbox.put_nowait(answer)
        self.worker_ns += time.thread_time_ns() - t0
        return True

    async def recv(self):
        frame = await self.inbox.get()
        return decode(frame, "worker")          # the scheduler's cost, as WorkerLink.recv

    def _answer(self, frame: bytes):
        msg = decode(frame, "scheduler")
        kind = msg.WhichOneof("kind")
        if kind == "ping":
            hello = pb.WorkerHello()
            hello.CopyFrom(self.hello)
            hello.nonce = msg.ping.nonce
            return encode(pb.WorkerMessage(hello=hello))
        if kind != "step":
            return None
        return encode(pb.WorkerMessage(result=self._run(msg.step)))

    def _run(self, step) -> "pb.StepResult":
        self.num_steps += 1
        for new in step.new_requests:
            self.num_logprobs[new.req_id] = new.sampling.num_logprobs
        for req_id in step.finished_req_ids:
            self.num_logprobs.pop(req_id, None)
        result = pb.StepResult(step_id=step.step_id, session_id=step.session_id, forward_ns=0)
        span = self.vocab - 19
        # Top logprobs are aligned with req_ids when any row asked, absent otherwise (pb.StepResult).
        any_top = any(self.num_logprobs.get(row.req_id) for row in step.rows if row.sample)
        for i, row in enumerate(step.rows):
            if not row.sample:
                continue
            token = 3 + (step.step_id * 7919 + i * 104729) % span
            if self.stop_every and (step.step_id + i) % self.stop_every == 0:
                token = self.stop_token
            result.req_ids.append(row.req_id)
            result.token_ids.append(token)
            result.logprobs.append(-0.5)
            k = self.num_logprobs.get(row.req_id, 0)
            if any_top:
                top = result.top_logprobs.add()
            if k:
                top.token_ids.extend(range(token, token + k))
                top.logprobs.extend([-0.5 - j for j in range(k)])
        return result
