"""Gateway process: llama.cpp's clients on the /v1 routes: what marks a request as one (speaks_llama_cpp) and the
values llama-server reads otherwise than vLLM there (its sampling ranges; the limit's aliases are llama_cpp_limits',
a final assistant message chat_prompt.llama_cpp_prefill's; a json_schema response format without a name)."""
from __future__ import annotations

from gateway.llama_cpp_fields import SCHEMA, V1_MAX_TEMPERATURE, clamp_sampling, zero_top_p

# llama.cpp's own request fields beyond SCHEMA's that its clients send on /v1 (its web UI sends return_progress with
# every stream, SillyTavern cache_prompt): with SCHEMA's, what marks a request as a llama.cpp client's.
_OWN_FIELDS = (*SCHEMA, "return_progress", "timings_per_token", "cache_prompt", "id_slot")


def speaks_llama_cpp(body: dict) -> bool:
    """Whether a /v1 request names one of llama.cpp's own fields (sent, not null): a llama.cpp client's request."""
    return any(body.get(key) is not None for key in _OWN_FIELDS)


def llama_cpp_ranges(body):
    """A llama.cpp client's sampling values read in llama-server's ranges, as /completion reads them: top_k, top_p,
    min_p, typical_p and a negative temperature clamped (clamp_sampling, server-schema.cpp's set_limits), top_p 0 the
    most likely token (zero_top_p); a temperature above /v1's bound is taken after the schema (high_temperature), as
    llama.cpp sets none. Any other request keeps vLLM's and OpenAI's 400s."""
    if not isinstance(body, dict) or not speaks_llama_cpp(body):
        return body
    return unnamed_schema(zero_top_p(clamp_sampling(body)))


def unnamed_schema(body: dict) -> dict:
    """body with a response_format json_schema that has no name (absent or null) named "response": llama-server reads
    only its schema (tools/server/server-common.cpp oaicompat_chat_params_parse: json_schema.schema), where OpenAI and
    vLLM require the name (a 400), which the /v1 schema checks."""
    fmt = body.get("response_format")
    wrapper = fmt.get("json_schema") if isinstance(fmt, dict) and fmt.get("type") == "json_schema" else None
    if not isinstance(wrapper, dict) or wrapper.get("name") is not None:
        return body
    return {**body, "response_format": {**fmt, "json_schema": {**wrapper, "name": "response"}}}


def high_temperature(body, sampling) -> None:
    """A temperature above /v1's bound (OpenAI's 2), which clamp_sampling held at it for the schema, set as sent on
    `sampling`: llama.cpp takes any temperature at or above 0 (5 with min_p is a common llama.cpp setting)."""
    temperature = body.get("temperature") if isinstance(body, dict) else None
    if isinstance(temperature, float | int) and not isinstance(temperature, bool) and \
            temperature > V1_MAX_TEMPERATURE and sampling.temperature == V1_MAX_TEMPERATURE:
        sampling.temperature = float(temperature)
