"""Unit tests: a scheduler and a worker of two releases (another proto/wire_version.py WIRE_VERSION) refuse each other
at their handshake, each saying so once, instead of running steps whose fields the other reads otherwise (a worker
from before StepRow.block_table_start took a row's new block ids for its whole block table). Before, any WorkerHello
that answered a ping registered its worker, whatever release it came from."""
import asyncio
import logging

from prometheus_client import CollectorRegistry

from proto import pb
from proto.wire_version import WIRE_VERSION, _message_lines
from scheduler.config import SchedulerConfig
from scheduler.engine import Engine
from scheduler.metrics import Metrics
from tests.unit.test_scheduler_engine import CARD, FakeLink, drain, hello, request
from worker.wire import SchedulerLink


def test_the_version_covers_every_message_the_worker_link_carries_and_nothing_else():
    text = "\n".join(_message_lines(pb.WorkerMessage.DESCRIPTOR, set()))
    for line in ("block_table_start = 8", "previous_token = 7", "message sparkinfer.v1.SamplingParams",
                 "enum sparkinfer.v1.SamplingParams.Chain", "message sparkinfer.v1.TopLogprobs"):
        assert line in text
    # The gateway's messages are not part of it: a change to them does not part a scheduler from its worker.
    assert "GenerateRequest" not in text and "LoadResponse" not in text
    assert len(WIRE_VERSION) == 16 and int(WIRE_VERSION, 16) >= 0


async def test_the_scheduler_registers_no_worker_of_another_version(caplog):
    link = FakeLink()
    link.auto = False    # no worker answers by itself: the hellos below are the only ones
    engine = Engine(SchedulerConfig(ping_interval_s=0.02, worker_timeout_s=0.2), CARD, link,
                    Metrics(CollectorRegistry()))
    engine.start()
    with caplog.at_level(logging.ERROR, logger="sparkinfer.scheduler"):
        for nonce, version in ((5, ""), (6, "0123456789abcdef"), (7, "")):
            link.inbox.put_nowait(hello("old", nonce, wire_version=version))
        await asyncio.sleep(0.2)
    assert not engine.worker_alive and not engine.load().worker_alive
    refusals = [r.getMessage() for r in caplog.records if "wire version" in r.getMessage()]
    assert len(refusals) == 1 and "worker old speaks wire version (none)" in refusals[0]
    assert WIRE_VERSION in refusals[0]
    # The pings it sends carry its own version, for a worker to check.
    pings = [m.ping for m in link.sent if m.WhichOneof("kind") == "ping"]
    assert pings and all(ping.wire_version == WIRE_VERSION for ping in pings)
    # A worker of this release registers and serves.
    link.auto, link.worker_id = True, "new"
    link.inbox.put_nowait(hello("new", 8))
    await asyncio.wait_for(engine.alive_event.wait(), 1)
    tokens, last = await drain(engine.submit(request("after")))
    assert len(tokens) == 5 and engine.worker_id == "new"
    await engine.stop()


def test_the_worker_answers_no_ping_of_another_version(capsys):
    link = SchedulerLink("tcp://127.0.0.1:1", pb.WorkerHello(worker_id="w", wire_version=WIRE_VERSION))
    sent = []
    link._send = sent.append
    try:
        link.handle_ping(pb.Ping(nonce=3, session_id="s"))
        link.handle_ping(pb.Ping(nonce=4, session_id="s", wire_version="0123456789abcdef"))
        assert sent == []
        out = capsys.readouterr().out
        assert out.count("wire version") == 1 and "(none)" in out and WIRE_VERSION in out
        link.handle_ping(pb.Ping(nonce=5, session_id="s", wire_version=WIRE_VERSION))
        assert [m.hello.nonce for m in sent] == [5] and sent[0].hello.wire_version == WIRE_VERSION
    finally:
        link.context.term()


async def test_the_scheduler_registers_no_worker_of_another_checkpoint(caplog):
    """A worker started on another checkpoint than the scheduler's (SPARKINFER_MODEL changed on one process only) was
    registered: the gateways rendered and tokenized for the scheduler's model while the worker ran the other's weights
    (answers of another model, under the first one's name). Its hello's checkpoint_digest now has to be the card's."""
    link = FakeLink()
    link.auto = False
    card = {**CARD, "model_id": "Qwen3.5-27B", "checkpoint_digest": "0123456789abcdef"}
    engine = Engine(SchedulerConfig(ping_interval_s=0.02, worker_timeout_s=0.2), card, link,
                    Metrics(CollectorRegistry()))
    engine.start()
    with caplog.at_level(logging.ERROR, logger="sparkinfer.scheduler"):
        for nonce in (5, 6):
            other = hello("other", nonce)
            other.hello.model_id, other.hello.checkpoint_digest = "Qwen3.5-9B", "fedcba9876543210"
            link.inbox.put_nowait(other)
        await asyncio.sleep(0.2)
    assert not engine.worker_alive
    refusals = [r.getMessage() for r in caplog.records if "checkpoint" in r.getMessage()]
    assert len(refusals) == 1 and "'Qwen3.5-9B' (digest fedcba9876543210)" in refusals[0]
    assert "'Qwen3.5-27B' (digest 0123456789abcdef)" in refusals[0]
    same = hello("same", 7)
    same.hello.checkpoint_digest = "0123456789abcdef"
    link.auto, link.worker_id = True, "same"
    link.inbox.put_nowait(same)
    await asyncio.wait_for(engine.alive_event.wait(), 1)
    await engine.stop()


def test_one_checkpoint_has_one_digest_wherever_it_is(tmp_path):
    import shutil

    from worker.model_card import load_model_card

    copy = tmp_path / "elsewhere"
    shutil.copytree("models/tiny", copy)
    digest = load_model_card("models/tiny")["checkpoint_digest"]
    assert load_model_card(str(copy))["checkpoint_digest"] == digest and len(digest) == 16
    config = (copy / "config.json").read_text()
    (copy / "config.json").write_text(config.replace("{", '{"torch_dtype": "bfloat16", ', 1))
    assert load_model_card(str(copy))["checkpoint_digest"] != digest
