"""Gateway with the fake scheduler: pins /v1 response bodies and SSE streams byte for byte (ids, created and
llama.cpp's measured timings normalised)."""
import asyncio
import pprint
import re
import sys

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from gateway.app import create_app
from gateway.client import SchedulerClient
from gateway.config import GatewayConfig
from gateway.fake_scheduler import FakeServing, build_tokenizer, start_fake_server

_ID_RE = re.compile(rb'"(chatcmpl|cmpl|call)[-_][0-9a-f]+(-\d+)?"')
_CREATED_RE = re.compile(rb'"created":\d+')
# llama.cpp's timings on one-choice answers (b53e80d): the keys are pinned, the measured times and rates are not
_TIMING_RE = re.compile(rb'"((?:prompt|predicted)_(?:ms|per_token_ms|per_second))":[-+0-9.eE]+')

CHAT = {"model": "fake-model", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
TOOL_REPLY = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"

# (name, method, path, body, scripted reply)
CASES = [
    ("models", "GET", "/v1/models", None, None),
    ("model_by_id", "GET", "/v1/models/fake-model", None, None),
    ("chat", "POST", "/v1/chat/completions", CHAT, "Hello world"),
    ("chat_thinking_off", "POST", "/v1/chat/completions", {**CHAT, "enable_thinking": False}, "Hello world"),
    ("chat_reasoning", "POST", "/v1/chat/completions", CHAT, "<think>\nhmm\n</think>\n\nHello world"),
    ("chat_length", "POST", "/v1/chat/completions", {**CHAT, "max_tokens": 2}, "Hello world, this is"),
    ("chat_stop", "POST", "/v1/chat/completions", {**CHAT, "stop": [" world"], "enable_thinking": False},
     "Hello world"),
    ("chat_stream", "POST", "/v1/chat/completions",
     {**CHAT, "stream": True, "stream_options": {"include_usage": True}}, "<think>ok</think>Hello world"),
    ("chat_stream_plain", "POST", "/v1/chat/completions", {**CHAT, "stream": True, "enable_thinking": False},
     "Hello world"),
    ("chat_tools", "POST", "/v1/chat/completions", {**CHAT, "tools": TOOLS, "enable_thinking": False},
     TOOL_REPLY),
    ("chat_tools_stream", "POST", "/v1/chat/completions",
     {**CHAT, "tools": TOOLS, "enable_thinking": False, "stream": True}, TOOL_REPLY),
    ("completion", "POST", "/v1/completions", {"model": "fake-model", "prompt": "Hello", "max_tokens": 4},
     "world, this is a test"),
    ("completion_stream", "POST", "/v1/completions",
     {"model": "fake-model", "prompt": "Hello", "max_tokens": 3, "stream": True,
      "stream_options": {"include_usage": True}}, "world, this is a test"),
    ("completion_echo_zero", "POST", "/v1/completions",
     {"model": "fake-model", "prompt": "Hello", "max_tokens": 0, "echo": True}, None),
    ("unknown_model", "POST", "/v1/chat/completions", {**CHAT, "model": "nope"}, None),
    ("bad_temperature", "POST", "/v1/chat/completions", {**CHAT, "temperature": 5}, None),
    ("context_exceeded", "POST", "/v1/completions",
     {"model": "fake-model", "prompt": "Hello world " * 1200, "max_tokens": 4}, None),
    ("no_route", "GET", "/v1/nothing", None, None),
]


def normalise(raw: bytes) -> str:
    raw = _ID_RE.sub(lambda m: b'"' + m.group(1) + b'-ID"', raw)
    raw = _TIMING_RE.sub(lambda m: b'"' + m.group(1) + b'":0', raw)
    return _CREATED_RE.sub(b'"created":0', raw).decode("utf-8")


async def _run_case(client: TestClient, servicer: FakeServing, case) -> dict:
    name, method, path, body, reply = case
    servicer.script.reply = reply or "Hello world"
    response = await client.request(method, path, data=None if body is None else orjson.dumps(body),
                                    headers={"Content-Type": "application/json"})
    raw = await response.read()
    return {"status": response.status, "content_type": response.headers.get("Content-Type"),
            "body": normalise(raw)}


async def current_outputs() -> dict:
    """The /v1 output of every case against a fresh fake scheduler (no real model)."""
    servicer = FakeServing(build_tokenizer(), max_context_len=2048)
    server, addr = await start_fake_server(servicer)
    app = create_app(GatewayConfig(), client=SchedulerClient(addr))
    client = TestClient(TestServer(app))
    await client.start_server()
    try:
        return {case[0]: await _run_case(client, servicer, case) for case in CASES}
    finally:
        await client.close()
        await server.stop(None)


@pytest.fixture(scope="module")
def outputs():
    return asyncio.run(current_outputs())


@pytest.mark.parametrize("name", [case[0] for case in CASES])
def test_v1_output_is_unchanged(outputs, name):
    assert outputs[name] == GOLDEN[name]


def test_golden_covers_every_case():
    assert sorted(GOLDEN) == sorted(case[0] for case in CASES)


GOLDEN = {'bad_temperature': {'body': '{"error":{"message":"invalid value for \'temperature\': 5 is greater than the '
                             'maximum of '
                             '2","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}',
                     'content_type': 'application/json',
                     'status': 400},
 'chat': {'body': '{"id":"chatcmpl-ID","object":"chat.completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"message":{"role":"assistant","content":"","refusal":null,"reasoning_content":"Hello '
                  'world","reasoning":"Hello '
                  'world"},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":3}},"timings":{"cache_n":0,"prompt_n":12,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":3,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0}}',
          'content_type': 'application/json',
          'status': 200},
 'chat_length': {'body': '{"id":"chatcmpl-ID","object":"chat.completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"message":{"role":"assistant","content":"","refusal":null,"reasoning_content":"Hello '
                         'world","reasoning":"Hello '
                         'world"},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":12,"completion_tokens":2,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}},"timings":{"cache_n":0,"prompt_n":12,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":2,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0}}',
                 'content_type': 'application/json',
                 'status': 200},
 'chat_reasoning': {'body': '{"id":"chatcmpl-ID","object":"chat.completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"message":{"role":"assistant","content":"Hello '
                            'world","refusal":null,"reasoning_content":"\\nhmm\\n","reasoning":"\\nhmm\\n"},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":12,"completion_tokens":12,"total_tokens":24,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":5}},"timings":{"cache_n":0,"prompt_n":12,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":12,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0}}',
                    'content_type': 'application/json',
                    'status': 200},
 'chat_stop': {'body': '{"id":"chatcmpl-ID","object":"chat.completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"message":{"role":"assistant","content":"Hello","refusal":null,"reasoning_content":null,"reasoning":null},"logprobs":null,"finish_reason":"stop","stop_reason":" '
                       'world"}],"usage":{"prompt_tokens":16,"completion_tokens":2,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}},"timings":{"cache_n":0,"prompt_n":16,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":2,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0}}',
               'content_type': 'application/json',
               'status': 200},
 'chat_stream': {'body': 'data: '
                         '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}\n'
                         '\n'
                         'data: '
                         '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"reasoning_content":"o","reasoning":"o"},"logprobs":null,"finish_reason":null}],"usage":null}\n'
                         '\n'
                         'data: '
                         '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"reasoning_content":"k","reasoning":"k"},"logprobs":null,"finish_reason":null}],"usage":null}\n'
                         '\n'
                         'data: '
                         '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}\n'
                         '\n'
                         'data: '
                         '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"content":" '
                         'world"},"logprobs":null,"finish_reason":null}],"usage":null}\n'
                         '\n'
                         'data: '
                         '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":null}\n'
                         '\n'
                         'data: '
                         '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}},"timings":{"cache_n":0,"prompt_n":12,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":7,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0}}\n'
                         '\n'
                         'data: [DONE]\n'
                         '\n',
                 'content_type': 'text/event-stream; charset=utf-8',
                 'status': 200},
 'chat_stream_plain': {'body': 'data: '
                               '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n'
                               '\n'
                               'data: '
                               '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}\n'
                               '\n'
                               'data: '
                               '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"content":" '
                               'world"},"logprobs":null,"finish_reason":null}]}\n'
                               '\n'
                               'data: '
                               '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"timings":{"cache_n":0,"prompt_n":16,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":3,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0}}\n'
                               '\n'
                               'data: [DONE]\n'
                               '\n',
                       'content_type': 'text/event-stream; charset=utf-8',
                       'status': 200},
 'chat_thinking_off': {'body': '{"id":"chatcmpl-ID","object":"chat.completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"message":{"role":"assistant","content":"Hello '
                               'world","refusal":null,"reasoning_content":null,"reasoning":null},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":16,"completion_tokens":3,"total_tokens":19,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}},"timings":{"cache_n":0,"prompt_n":16,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":3,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0}}',
                       'content_type': 'application/json',
                       'status': 200},
 'chat_tools': {'body': '{"id":"chatcmpl-ID","object":"chat.completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"reasoning_content":null,"reasoning":null,"tool_calls":[{"id":"call-ID","type":"function","function":{"name":"get_weather","arguments":"{\\"city\\":\\"Paris\\"}"}}]},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}],"usage":{"prompt_tokens":746,"completion_tokens":45,"total_tokens":791,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}},"timings":{"cache_n":0,"prompt_n":746,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":45,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0}}',
                'content_type': 'application/json',
                'status': 200},
 'chat_tools_stream': {'body': 'data: '
                               '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n'
                               '\n'
                               'data: '
                               '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call-ID","type":"function","function":{"name":"get_weather","arguments":""}}]},"logprobs":null,"finish_reason":null}]}\n'
                               '\n'
                               'data: '
                               '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]},"logprobs":null,"finish_reason":null}]}\n'
                               '\n'
                               'data: '
                               '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\"city\\":\\"Par"}}]},"logprobs":null,"finish_reason":null}]}\n'
                               '\n'
                               'data: '
                               '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"is"}}]},"logprobs":null,"finish_reason":null}]}\n'
                               '\n'
                               'data: '
                               '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\\"}"}}]},"logprobs":null,"finish_reason":null}]}\n'
                               '\n'
                               'data: '
                               '{"id":"chatcmpl-ID","object":"chat.completion.chunk","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}],"timings":{"cache_n":0,"prompt_n":746,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":45,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0}}\n'
                               '\n'
                               'data: [DONE]\n'
                               '\n',
                       'content_type': 'text/event-stream; charset=utf-8',
                       'status': 200},
 'completion': {'body': '{"id":"cmpl-ID","object":"text_completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"text":"world,","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":4,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":0}},"timings":{"cache_n":0,"prompt_n":1,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":4,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0}}',
                'content_type': 'application/json',
                'status': 200},
 'completion_echo_zero': {'body': '{"id":"cmpl-ID","object":"text_completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"text":"Hello","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1,"prompt_tokens_details":{"cached_tokens":0}}}',
                          'content_type': 'application/json',
                          'status': 200},
 'completion_stream': {'body': 'data: '
                               '{"id":"cmpl-ID","object":"text_completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"text":"w","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}\n'
                               '\n'
                               'data: '
                               '{"id":"cmpl-ID","object":"text_completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"text":"or","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}\n'
                               '\n'
                               'data: '
                               '{"id":"cmpl-ID","object":"text_completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[{"index":0,"text":"ld","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":null}\n'
                               '\n'
                               'data: '
                               '{"id":"cmpl-ID","object":"text_completion","created":0,"model":"fake-model","system_fingerprint":"fp_273558059a","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4,"prompt_tokens_details":{"cached_tokens":0}},"timings":{"cache_n":0,"prompt_n":1,"prompt_ms":0,"prompt_per_token_ms":0,"prompt_per_second":0,"predicted_n":3,"predicted_ms":0,"predicted_per_token_ms":0,"predicted_per_second":0}}\n'
                               '\n'
                               'data: [DONE]\n'
                               '\n',
                       'content_type': 'text/event-stream; charset=utf-8',
                       'status': 200},
 'context_exceeded': {'body': '{"error":{"message":"This model\'s maximum context length is 2048 tokens. '
                              'However, your request has 3600 input tokens. Please reduce the length of the '
                              'input '
                              'messages.","type":"invalid_request_error","param":"prompt","code":"context_length_exceeded"}}',
                      'content_type': 'application/json',
                      'status': 400},
 'model_by_id': {'body': '{"id":"fake-model","object":"model","created":0,"owned_by":"sparkinfer","root":"fake-model","parent":null,"max_model_len":2048,"permission":[{"id":"modelperm-025ecfa818e853d9b882a3f070e8b866","object":"model_permission","created":0,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}],"meta":{"vocab_type":2,"n_vocab":372,"n_ctx":2048,"n_ctx_train":2048,"n_embd":64,"n_params":1000,"size":2000}}',
                 'content_type': 'application/json',
                 'status': 200},
 'models': {'body': '{"object":"list","data":[{"id":"fake-model","object":"model","created":0,"owned_by":"sparkinfer","root":"fake-model","parent":null,"max_model_len":2048,"permission":[{"id":"modelperm-025ecfa818e853d9b882a3f070e8b866","object":"model_permission","created":0,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}],"meta":{"vocab_type":2,"n_vocab":372,"n_ctx":2048,"n_ctx_train":2048,"n_embd":64,"n_params":1000,"size":2000}}],"models":[{"name":"fake-model","model":"fake-model","modified_at":"","size":"","digest":"","type":"model","description":"","tags":[""],"capabilities":["completion"],"parameters":"","details":{"parent_model":"","format":"safetensors","family":"qwen3_5","families":["qwen3_5"],"parameter_size":"1K","quantization_level":"BF16"}}]}',
            'content_type': 'application/json',
            'status': 200},
 'no_route': {'body': '{"error":{"message":"no route '
                      '/v1/nothing","type":"not_found_error","param":null,"code":"not_found"}}',
              'content_type': 'application/json',
              'status': 404},
 'unknown_model': {'body': '{"error":{"message":"The model \'nope\' does not exist. This server serves '
                           "'fake-model' (also reachable as "
                           '\'default\').","type":"not_found_error","param":"model","code":"model_not_found"}}',
                   'content_type': 'application/json',
                   'status': 404}}


if __name__ == "__main__":
    sys.stdout.write("GOLDEN = " + pprint.pformat(asyncio.run(current_outputs()), width=110) + "\n")
