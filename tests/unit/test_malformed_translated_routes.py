"""Edge input on the routes and fields session 24 touched (the sweep of test_malformed_every_route.py, continued by job):
/metrics' name[] filter read as prometheus_client's handler reads its query, and the errors of the routes whose body is
translated into another's (SGLang's /generate, vLLM's /inference/v1/generate) naming the fields the client sent."""
import json
from urllib.parse import parse_qs

import pytest
from prometheus_client.parser import text_string_to_metric_families


async def family_names(client, query: str = "") -> set:
    response = await client.get("/metrics" + query)
    assert response.status == 200
    return {family.name for family in text_string_to_metric_families((await response.read()).decode())}


@pytest.mark.parametrize("query", ["?name[]=", "?name[]=&name[]=", "?name[]=&foo=bar"])
async def test_a_blank_name_filter_scrapes_every_series_as_prometheus_clients_handler_does(stack, query):
    """prometheus_client's handler (vLLM's /metrics, the scheduler's here) reads the query with parse_qs, which drops
    blank values, so ?name[]= filters nothing (exposition.py _bake_output: `if 'name[]' in params`). The gateway's
    aiohttp query kept the blank name, which no series has: it answered an empty scrape."""
    client, _ = stack
    assert "name[]" not in parse_qs(query[1:])
    every = await family_names(client)
    assert "sparkinfer_gateway_requests_in_flight" in every
    assert await family_names(client, query) == every


async def test_a_blank_name_beside_a_real_one_keeps_only_that_series(stack):
    client, _ = stack
    assert await family_names(client, "?name[]=&name[]=process_start_time_seconds") == {"process_start_time_seconds"}


GENERATE = {"text": "hi", "sampling_params": {"max_new_tokens": 4}}
TOKENS = {"token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 4}}
# (route, a bad body, the field the client sent, as the error must name it, and the translated name it must not use)
NAMED = [("/generate", {**GENERATE, "sampling_params": {"max_new_tokens": "x"}}, "sampling_params.max_new_tokens",
          "max_new_tokens", "'max_tokens'"),
         ("/generate", {**GENERATE, "sampling_params": {"max_new_tokens": 4, "min_new_tokens": 9}},
          "sampling_params.min_new_tokens", "min_new_tokens (9) must be at most max_new_tokens (4)", "min_tokens"),
         ("/generate", {**GENERATE, "sampling_params": {"max_new_tokens": 4, "min_new_tokens": -1}},
          "sampling_params.min_new_tokens", "'min_new_tokens'", "'min_tokens'"),
         ("/generate", {**GENERATE, "sampling_params": {"max_new_tokens": 4, "sampling_seed": "x"}},
          "sampling_params.sampling_seed", "'sampling_seed'", "'seed'"),
         ("/generate", {**GENERATE, "sampling_params": {"max_new_tokens": 4, "json_schema": "{bad"}},
          "sampling_params.json_schema", "json_schema is not valid JSON", "guided_json"),
         ("/generate", {**GENERATE, "sampling_params": {"max_new_tokens": 4, "stop_token_ids": ["a"]}},
          "sampling_params.stop_token_ids[0]", "'stop_token_ids[0]'", None),
         ("/generate", {"input_ids": [], "sampling_params": {"max_new_tokens": 4}}, "input_ids", "'input_ids'",
          "'prompt'"),
         ("/generate", {"text": ["a", ""], "sampling_params": {"max_new_tokens": 4}}, "text[1]", "empty", "prompt["),
         ("/inference/v1/generate", {**TOKENS, "sampling_params": {"max_tokens": "x"}}, "sampling_params.max_tokens",
          "'max_tokens'", None),
         ("/inference/v1/generate", {**TOKENS, "sampling_params": {"max_tokens": 4, "min_tokens": 9}},
          "sampling_params.min_tokens", "min_tokens (9)", None),
         ("/inference/v1/generate", {**TOKENS, "sampling_params": {"max_tokens": 4, "stop_token_ids": ["a"]}},
          "sampling_params.stop_token_ids[0]", "'stop_token_ids[0]'", None),
         ("/inference/v1/generate", {**TOKENS, "sampling_params": {"max_tokens": 4, "logprobs": 21}},
          "sampling_params.logprobs", "logprobs of 21", None),
         ("/inference/v1/generate", {**TOKENS, "token_ids": []}, "token_ids", "'token_ids'", "'prompt'"),
         ("/inference/v1/generate", {**TOKENS, "token_ids": [1, 10 ** 6]}, "token_ids", "10000", None)]


@pytest.mark.parametrize("path, body, param, says, never", NAMED,
                         ids=[f"{row[0]}-{row[2]}-{i}" for i, row in enumerate(NAMED)])
async def test_a_translated_routes_error_names_the_field_the_client_sent(stack, path, body, param, says, never):
    """SGLang's /generate and vLLM's /inference/v1/generate run as a /v1/completions request; their errors named its
    fields (`invalid value for 'max_tokens'` with param sampling_params.max_new_tokens, `min_tokens (9) must be at most
    max_tokens (4)`, `guided_json is not valid JSON`, param `stop_token_ids[0]`, `prompt`), which the client never
    sent. SGLang's own errors name its fields (SamplingParams.verify: `min_new_tokens must be in [0,
    max_new_tokens(4)], got 9.`), as LM Studio's /api/v1/chat, the Responses and Anthropic routes here already do."""
    client, fake = stack
    response = await client.post(path, data=json.dumps(body), headers={"Content-Type": "application/json"})
    error = (await response.json())["error"]
    assert response.status == 400 and error["param"] == param, error
    assert says in error["message"] and (never is None or never not in error["message"]), error
    assert fake.script.requests == []
