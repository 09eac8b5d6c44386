"""SGLang's GET /get_server_info (also /server_info) and /get_load (fake scheduler): SGLang's router (sgl-model-gateway)
registers a worker from its server info (served_model_name, dp_size) and balances on /get_load, and clients read a
request's limit (max_req_input_len) and the KV pool (max_total_num_tokens) from the server info; all three were our
404 'no route'. Values from the served card and the scheduler's Load (its KV blocks times block_size)."""
import pytest

LOAD = {"num_waiting": 2, "num_total_blocks": 64, "num_free_blocks": 40, "num_cached_blocks": 4, "block_size": 16}


@pytest.mark.parametrize("path", ["/get_server_info", "/server_info"])
async def test_server_info_states_the_limits(stack, path):
    client, fake = stack
    fake.load_fields = LOAD
    response = await client.get(path)
    assert response.status == 200
    info = await response.json()
    assert (info["served_model_name"], info["model_path"], info["dp_size"], info["tp_size"]) == (
        "fake-model", "fake-model", 1, 1)
    assert (info["context_length"], info["max_req_input_len"], info["max_total_num_tokens"]) == (2048, 2047, 64 * 16)
    assert (info["max_running_requests"], info["is_embedding"], info["internal_states"]) == (64, False, [{}])
    assert info["version"]


async def test_get_load_counts_requests_and_held_tokens(stack):
    client, fake = stack
    fake.num_running = 3
    fake.load_fields = LOAD
    response = await client.get("/get_load")
    assert response.status == 200
    # 64 blocks, 40 free, 4 held by the prefix cache: 20 blocks of 16 tokens held by requests.
    assert await response.json() == [{"dp_rank": 0, "num_reqs": 5, "num_waiting_reqs": 2, "num_tokens": 320}]


async def test_v1_loads_is_the_core_snapshot(stack):
    client, fake = stack
    fake.num_running = 3
    fake.load_fields = LOAD
    response = await client.get("/v1/loads?include=core")
    assert response.status == 200
    assert await response.json() == {"loads": [{
        "dp_rank": 0, "num_running_reqs": 3, "num_waiting_reqs": 2, "num_used_tokens": 320,
        "max_total_num_tokens": 1024, "token_usage": 320 / 1024, "max_running_requests": 64}]}
