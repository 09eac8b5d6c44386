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
