"""vLLM's allowed_token_ids on /v1 (fake scheduler, worker sampler, scheduler admission): only the listed ids may be
sampled, eos's too, as vLLM's allowed-token mask; an empty list or an id outside the vocabulary is vLLM's 400."""
import orjson
import pytest
import torch

from proto import pb
from scheduler.admission import InvalidRequestError, check_sampling
from worker.sampler import Sampler, SamplingState

CHAT = ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
COMPLETION = ("/v1/completions", {"prompt": "hi"})
V, EOS = 50, 7


@pytest.mark.parametrize("path,body", [CHAT, COMPLETION], ids=["chat", "completions"])
async def test_ids_reach_the_scheduler(stack, path, body):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**body, "max_tokens": 2, "allowed_token_ids": [9, 3, 9]}))
    assert response.status == 200, await response.text()
    assert list(fake.script.requests[0].sampling.allowed_token_ids) == [3, 9]


@pytest.mark.parametrize("ids,message", [
    ([], "allowed_token_ids is not None and empty!"),
    ([3, 99999], "allowed_token_ids contains out-of-vocab token id!"),
    ([-1], "allowed_token_ids contains out-of-vocab token id!"),
], ids=["empty", "past-vocab", "negative"])
@pytest.mark.parametrize("path,body", [CHAT, COMPLETION], ids=["chat", "completions"])
async def test_vllm_refusals(stack, path, body, ids, message):
    client, fake = stack
    response = await client.post(path, data=orjson.dumps({**body, "allowed_token_ids": ids}))
    error = (await response.json())["error"]
    assert (response.status, error["message"], error["param"]) == (400, message, "allowed_token_ids")
    assert not fake.script.requests


def _state(allowed=(), outputs=(), **params):
    return SamplingState("r", pb.SamplingParams(allowed_token_ids=list(allowed), **params), [1, 2], list(outputs),
                         min_tokens_stop_ids=(EOS,))


def test_greedy_takes_the_best_allowed_token_and_raw_logprobs():
    logits = torch.arange(V, dtype=torch.float32).repeat(3, 1)
    logits[:, EOS] = 100.0
    out = Sampler(V).sample(logits, [_state([3, 11]), _state([EOS, 11]), _state()])
    assert out.token_ids == [11, EOS, EOS]
    assert out.logprobs[0] == torch.log_softmax(logits[0], -1)[11].item()


def test_sampled_rows_draw_only_allowed_ids():
    logits = torch.zeros(400, V)
    logits[:, EOS] = 6.0
    out = Sampler(V, seed=3).sample(logits, [_state([2, 5, 40], temperature=1.0)] * 400)
    assert set(out.token_ids) == {2, 5, 40}


def test_admission_refuses_ids_outside_the_vocabulary():
    request = pb.GenerateRequest(req_id="r", prompt_token_ids=[1], max_tokens=4,
                                 sampling=pb.SamplingParams(allowed_token_ids=[3, V]))
    with pytest.raises(InvalidRequestError, match="allowed_token_ids"):
        check_sampling(request, V)
    check_sampling(pb.GenerateRequest(req_id="r", prompt_token_ids=[1], max_tokens=4,
                                      sampling=pb.SamplingParams(allowed_token_ids=[3, V - 1])), V)
