"""Unit tests: scheduler <-> worker frames round-trip through both codecs, and bad frames raise typed errors."""
import pytest

from proto import pb
from scheduler import wire as scheduler_wire
from worker import wire as worker_wire


def step_message():
    step = pb.PackedStep(step_id=7, session_id="s1", finished_req_ids=["gone"], token_ids=[1, 2, 3, 4])
    step.new_requests.add(req_id="a", prompt_token_ids=[1, 2, 3], output_token_ids=[9],
                          sampling=pb.SamplingParams(temperature=0.7, top_p=0.9, top_k=5, has_seed=True,
                                                     seed=2 ** 63 + 5, logit_bias={3: -100.0, 7: 2.5}))
    step.rows.add(req_id="a", num_tokens=3, context_len=0, state_slot=4, block_table=[0, 5], sample=True)
    step.rows.add(req_id="b", num_tokens=1, context_len=40, state_slot=1, block_table=[1, 2, 3], sample=True)
    step.restore_states.add(src_slot=6, dst_slot=4)
    step.snapshot_states.add(src_slot=1, dst_slot=7)
    return pb.WorkerMessage(step=step)


def result_message():
    result = pb.StepResult(step_id=7, req_ids=["a", "b"], token_ids=[11, 12], logprobs=[-0.5, -1.25],
                           forward_ns=123456, session_id="s1")
    result.top_logprobs.add(token_ids=[11, 3], logprobs=[-0.5, -2.0])
    result.top_logprobs.add()
    return pb.WorkerMessage(result=result)


MESSAGES = {
    "step": step_message(),
    "result": result_message(),
    "hello": pb.WorkerMessage(hello=pb.WorkerHello(model_id="tiny", num_blocks=100, block_size=16, num_slots=8,
                                                   max_context_len=8192, device="cpu", nonce=3, worker_id="w1",
                                                   vocab_size=1024)),
    "ping": pb.WorkerMessage(ping=pb.Ping(nonce=2 ** 40, session_id="s1")),
    "shutdown": pb.WorkerMessage(shutdown=pb.Shutdown()),
}


@pytest.mark.parametrize("kind", sorted(MESSAGES))
def test_round_trip_through_both_codecs(kind):
    msg = MESSAGES[kind]
    frame = scheduler_wire.encode(msg)
    for decode in (scheduler_wire.decode, worker_wire.decode):
        back = decode(frame)
        assert back.WhichOneof("kind") == kind
        assert back == msg


def test_round_trip_keeps_exact_values():
    back = worker_wire.decode(scheduler_wire.encode(MESSAGES["step"])).step
    assert back.new_requests[0].sampling.seed == 2 ** 63 + 5
    assert dict(back.new_requests[0].sampling.logit_bias) == {3: -100.0, 7: 2.5}
    assert list(back.rows[1].block_table) == [1, 2, 3]
    result = scheduler_wire.decode(scheduler_wire.encode(MESSAGES["result"])).result
    assert list(result.logprobs) == [-0.5, -1.25]


@pytest.mark.parametrize("frame", [b"", b"\xff\xff\xff", pb.WorkerHello(model_id="x").SerializeToString()[:3]],
                         ids=["empty", "garbage", "truncated"])
def test_bad_frames_raise_wire_error(frame):
    with pytest.raises(scheduler_wire.WireError):
        scheduler_wire.decode(frame)
    with pytest.raises(worker_wire.WireError):
        worker_wire.decode(frame)


def test_no_pickle_on_the_wire():
    frame = scheduler_wire.encode(MESSAGES["step"])
    assert not frame.startswith(b"\x80")  # pickle protocol 2+ header


def test_addresses():
    assert scheduler_wire.split_addr("tcp://scheduler:5557") == ("scheduler", 5557, 5558)
    assert worker_wire.connect_addrs("tcp://10.0.0.2:6000") == ("tcp://10.0.0.2:6000", "tcp://10.0.0.2:6001")
    for bad in ("scheduler:5557", "ipc:///tmp/x", "tcp://host"):
        with pytest.raises(ValueError):
            scheduler_wire.split_addr(bad)
