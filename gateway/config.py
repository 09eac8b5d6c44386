"""Gateway process: its configuration, from flags over SPARKINFER_* environment variables over defaults."""
from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

from gateway.access_log import parse_paths
from gateway.cors import parse_origins


@dataclass
class GatewayConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    scheduler_addr: str = "127.0.0.1:50051"
    sse_keepalive_s: float = 15.0
    api_key: Optional[str] = None
    served_model_name: Optional[str] = None   # overrides the scheduler's model id in responses
    skip_model_name_validation: bool = False  # vLLM's switch: any request's model names the served model
    default_chat_template_kwargs: Optional[dict] = None  # vLLM's: template variables under each request's own
    chat_template: Optional[str] = None       # vLLM's --chat-template: the template text, in place of the checkpoint's
    force_include_usage: bool = False         # vLLM's --enable-force-include-usage: every stream carries usage
    max_body_bytes: int = 32 * 1024 * 1024    # request body limit, on the wire and once decoded (413 past it)
    body_timeout_s: float = 60.0              # a request's whole body must arrive within this (408 past it)
    keep_alive_timeout_s: float = 75.0        # an idle connection (no request yet, or between two) is closed after it
    exclude_tools_when_tool_choice_none: bool = False  # vLLM's flag: tool_choice "none" drops tools from the prompt
    trust_request_chat_template: bool = False  # render a request's own chat_template (Jinja that can loop for hours)
    drain_grace_s: float = 30.0               # on SIGTERM/SIGINT: how long requests in flight may take to finish
    access_log: bool = True                   # a log line per request, with its X-Request-Id
    access_log_excluded_paths: frozenset = frozenset()  # paths whose requests get no access log line
    allowed_origins: tuple = ("*",)            # CORS: the origins browser pages may call from (gateway.cors)
    allow_credentials: bool = False            # CORS: Access-Control-Allow-Credentials, the Origin echoed

    def printable(self) -> dict:
        """The config as a dict for the start-up log line, the API key shown as "set" or None."""
        shown = asdict(self)
        shown["api_key"] = "set" if self.api_key else None
        shown["chat_template"] = "set" if self.chat_template else None
        return shown


def _env(name: str, default):
    value = os.environ.get(name)
    return default if value in (None, "") else value


def env_number(parser: argparse.ArgumentParser, name: str, default, kind=float):
    """The variable `name` read as kind (default when unset or empty); one that is not a number ends the process
    with argparse's usage and a line naming it (a bad SPARKINFER_PORT or SPARKINFER_DRAIN_GRACE_S was a
    ValueError traceback)."""
    value = _env(name, default)
    try:
        return kind(value)
    except (TypeError, ValueError):
        parser.error(f"{name}={value!r} is not {'an integer' if kind is int else 'a number'}")


def env_switch(parser: argparse.ArgumentParser, name: str, default: bool) -> bool:
    """The on/off variable `name`: 1 or true on, 0 or false off (any case), default when unset or empty; another
    value ends the process with a line naming it (SPARKINFER_ACCESS_LOG=off logged every request, and
    SPARKINFER_ALLOW_CREDENTIALS=yes left credentials off, without a word)."""
    value = _env(name, None)
    if value is None:
        return default
    if value.strip().lower() not in ("1", "true", "0", "false"):
        parser.error(f"{name}={value!r} is not a switch: 1 (or true) turns it on, 0 (or false) off")
    return value.strip().lower() in ("1", "true")


# Read where they are used (on each request): checked here, so that a bad one stops the start, not every request.
_CHECKED_AT_START = (("SPARKINFER_GATEWAY_CPU_THREADS", int), ("SPARKINFER_GRAMMAR_MAX_STRING", int))


def _seconds(value: float) -> bool:
    return math.isfinite(value) and value > 0


# gRPC's own target schemes (grpc/doc/naming.md), read as given; anything else must be host:port.
_GRPC_SCHEMES = ("dns", "unix", "unix-abstract", "ipv4", "ipv6", "vsock", "xds")


def _grpc_target(addr: str) -> bool:
    """host:port with a port of 1-65535 (host a name, an IPv4 or a bracketed IPv6 address), or a gRPC target of one of
    its schemes. 127.0.0.1:99999 reached port 34463 (grpc takes the port modulo 65536), `localhost` port 443 and
    http://127.0.0.1:50051 a DNS lookup of the whole URL, each a 503 on every request instead of a line at start."""
    if addr.split(":", 1)[0] in _GRPC_SCHEMES:
        return True
    host, colon, port = addr.rpartition(":")
    return bool(colon and host.strip() and "/" not in host and port.isdigit() and 1 <= int(port) <= 65535)


# Checked at start: out of range, a port was an OverflowError traceback, a keep-alive period <= 0 sent a comment every
# 10 ms, a CPU pool of 0 threads was taken as 1, an API key of blanks let no request in.
_RANGES = (
    ("port", "--port (SPARKINFER_PORT)", lambda v: 1 <= v <= 65535, "is not a port number (1-65535)"),
    ("scheduler_addr", "--scheduler-addr (SPARKINFER_SCHEDULER_ADDR)", _grpc_target,
     "is not host:port with a port of 1-65535 (127.0.0.1:50051, scheduler:50051; no http://), nor a gRPC target "
     "such as dns:///scheduler:50051 or unix:/path"),
    ("sse_keepalive_seconds", "--sse-keepalive-seconds (SPARKINFER_SSE_KEEPALIVE_SECONDS)", _seconds,
     "must be a number of seconds > 0"),
    ("body_timeout_seconds", "--body-timeout-seconds (SPARKINFER_BODY_TIMEOUT_S)", _seconds,
     "must be a number of seconds > 0"),
    ("keep_alive_timeout_seconds", "--keep-alive-timeout-seconds (SPARKINFER_KEEP_ALIVE_TIMEOUT_S)", _seconds,
     "must be a number of seconds > 0"),
    ("drain_grace_seconds", "--drain-grace-seconds (SPARKINFER_DRAIN_GRACE_S)",
     lambda v: math.isfinite(v) and v >= 0, "must be a number of seconds >= 0"),
    # A key list of blanks and commas (app.key_matches drops blank keys) would start a server that refuses everyone.
    ("api_key", "--api-key (SPARKINFER_API_KEY)", lambda v: not v or any(key.strip() for key in v.split(",")),
     "holds no key, only blanks and commas: every request would be a 401"),
)
_ENV_RANGES = (("SPARKINFER_GATEWAY_CPU_THREADS", lambda v: v >= 1, "must be >= 1"),
               ("SPARKINFER_GRAMMAR_MAX_STRING", lambda v: v >= 0, "must be >= 0 (0 = unbounded)"))


def _check_ranges(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for name, label, ok, must in _RANGES:
        if not ok(getattr(args, name)):
            parser.error(f"{label}: {getattr(args, name)!r} {must}")
    for name, ok, must in _ENV_RANGES:
        if _env(name, None) is not None and not ok(int(_env(name, None))):
            parser.error(f"{name}={_env(name, None)!r} {must}")


def parse_config(argv: Optional[Sequence[str]] = None) -> GatewayConfig:
    """Flags win over SPARKINFER_* variables, which win over the defaults."""
    d = GatewayConfig()
    # No usage block before an error: a bad SPARKINFER_* value stops the start with one line (README, Configuration).
    parser = argparse.ArgumentParser(prog="python -m gateway.app", usage=argparse.SUPPRESS,
                                     description="SparkInfer HTTP gateway (OpenAI /v1, Anthropic /v1/messages, LM "
                                                 "Studio /api/v0, /api/v1 and its SDK websocket, Ollama /api, "
                                                 "llama.cpp's routes, SGLang's /generate and vLLM's "
                                                 "/inference/v1/generate). "
                                                 "Request bodies are limited to 32 MiB, on the wire and once decoded.")
    _add_serving_flags(parser, d)
    _add_behaviour_flags(parser, d)
    args = parser.parse_args(argv)
    for name, kind in _CHECKED_AT_START:
        env_number(parser, name, 0, kind)
    _check_ranges(parser, args)
    try:
        origins = parse_origins(args.allowed_origins)
    except ValueError as exc:
        parser.error(f"--allowed-origins (SPARKINFER_ALLOWED_ORIGINS): {args.allowed_origins!r} is not a JSON list of "
                     f"origins nor a comma-separated one ({exc})")
    return GatewayConfig(host=args.host, port=args.port, scheduler_addr=args.scheduler_addr,
                         sse_keepalive_s=args.sse_keepalive_seconds, body_timeout_s=args.body_timeout_seconds,
                         keep_alive_timeout_s=args.keep_alive_timeout_seconds,
                         api_key=args.api_key,
                         served_model_name=args.served_model_name,
                         skip_model_name_validation=args.skip_model_name_validation,
                         default_chat_template_kwargs=_template_kwargs(parser, args.default_chat_template_kwargs),
                         chat_template=_chat_template(parser, args.chat_template),
                         force_include_usage=args.force_include_usage,
                         exclude_tools_when_tool_choice_none=args.exclude_tools_when_tool_choice_none,
                         trust_request_chat_template=args.trust_request_chat_template,
                         drain_grace_s=args.drain_grace_seconds, access_log=not args.disable_access_log,
                         access_log_excluded_paths=parse_paths(args.disable_access_log_for_endpoints),
                         allowed_origins=origins, allow_credentials=args.allow_credentials)


def _add_serving_flags(parser: argparse.ArgumentParser, d: GatewayConfig) -> None:
    """Where the gateway listens, its scheduler, its stream keep-alive, body and idle timeouts, key and model name."""
    parser.add_argument("--host", default=_env("SPARKINFER_HOST", d.host),
                        help=f"bind address (SPARKINFER_HOST, default {d.host})")
    parser.add_argument("--port", type=int, default=env_number(parser, "SPARKINFER_PORT", d.port, int),
                        help=f"HTTP port (SPARKINFER_PORT, default {d.port})")
    parser.add_argument("--scheduler-addr", default=_env("SPARKINFER_SCHEDULER_ADDR", d.scheduler_addr),
                        help=f"scheduler gRPC host:port (SPARKINFER_SCHEDULER_ADDR, default {d.scheduler_addr})")
    parser.add_argument("--sse-keepalive-seconds", type=float,
                        default=env_number(parser, "SPARKINFER_SSE_KEEPALIVE_SECONDS", d.sse_keepalive_s),
                        help="seconds between keep-alive comments on a silent stream "
                             f"(SPARKINFER_SSE_KEEPALIVE_SECONDS, default {d.sse_keepalive_s:g})")
    parser.add_argument("--body-timeout-seconds", type=float,
                        default=env_number(parser, "SPARKINFER_BODY_TIMEOUT_S", d.body_timeout_s),
                        help="seconds a request's whole body may take to arrive once its headers are read; past it "
                             f"the answer is 408 and the connection closes (SPARKINFER_BODY_TIMEOUT_S, default "
                             f"{d.body_timeout_s:g})")
    parser.add_argument("--keep-alive-timeout-seconds", type=float,
                        default=env_number(parser, "SPARKINFER_KEEP_ALIVE_TIMEOUT_S", d.keep_alive_timeout_s),
                        help="seconds an idle connection (no request yet, or between two) is kept open "
                             f"(SPARKINFER_KEEP_ALIVE_TIMEOUT_S, default {d.keep_alive_timeout_s:g}; vLLM sets "
                             "uvicorn's from VLLM_HTTP_TIMEOUT_KEEP_ALIVE)")
    parser.add_argument("--api-key", default=_env("SPARKINFER_API_KEY", None),
                        help="require 'Authorization: Bearer KEY' (on Anthropic's and llama-server's routes also "
                             "'x-api-key: KEY', on llama-server's a bare 'Authorization: KEY' too, as it reads them) "
                             "on every route but /, /health, /v1/health, /ping, /health_generate, /metrics, /version "
                             "and llama.cpp's /models (SPARKINFER_API_KEY; several keys: comma-separated, any one "
                             "works)")
    parser.add_argument("--allowed-origins", default=_env("SPARKINFER_ALLOWED_ORIGINS", "*"),
                        help="origins browser pages may call the server from: * (any, the default, as vLLM's), or "
                             "a comma-separated list as OLLAMA_ORIGINS (a * inside one matches anything: "
                             "chrome-extension://*,http://localhost:*) or vLLM's JSON list; a request from another "
                             "origin is a 403 (SPARKINFER_ALLOWED_ORIGINS)")
    parser.add_argument("--allow-credentials", action="store_true",
                        default=env_switch(parser, "SPARKINFER_ALLOW_CREDENTIALS", d.allow_credentials),
                        help="CORS with credentials (cookies, HTTP auth), as vLLM's flag: the allowed Origin is "
                             "echoed instead of * (SPARKINFER_ALLOW_CREDENTIALS)")
    parser.add_argument("--served-model-name", default=_env("SPARKINFER_SERVED_MODEL_NAME", None),
                        help="model id shown to clients, or several separated by commas or blanks, the first shown, "
                             "each accepted (SPARKINFER_SERVED_MODEL_NAME; default: the scheduler's)")
    parser.add_argument("--skip-model-name-validation", action="store_true",
                        default=env_switch(parser, "SPARKINFER_SKIP_MODEL_NAME_VALIDATION",
                                           d.skip_model_name_validation),
                        help="take any request's model as the served model, as vLLM's "
                             "VLLM_SKIP_MODEL_NAME_VALIDATION (off: an unknown name is a 404) "
                             "(SPARKINFER_SKIP_MODEL_NAME_VALIDATION)")


# Template variables render_chat sets from the request's own fields: neither a request nor the defaults set them.
SERVER_TEMPLATE_VARIABLES = ("messages", "tools", "add_generation_prompt")


def _template_kwargs(parser: argparse.ArgumentParser, value: str) -> Optional[dict]:
    """--default-chat-template-kwargs as its JSON object (None when unset); anything else stops the start."""
    if not value:
        return None
    try:
        kwargs = json.loads(value)
    except ValueError:
        kwargs = None
    if not isinstance(kwargs, dict) or any(key in SERVER_TEMPLATE_VARIABLES for key in kwargs):
        parser.error(f"--default-chat-template-kwargs (SPARKINFER_DEFAULT_CHAT_TEMPLATE_KWARGS): {value!r} is not a "
                     f"JSON object of template variables (messages, tools and add_generation_prompt are the "
                     f"server's), such as {{\"enable_thinking\": false}}")
    return kwargs


def _chat_template(parser: argparse.ArgumentParser, value: str) -> Optional[str]:
    """--chat-template's template text (None when unset); one that cannot be read or compiled stops the start."""
    if not value:
        return None
    from gateway.template_source import load_chat_template   # jinja: only when a template is given
    try:
        return load_chat_template(value)
    except ValueError as exc:
        parser.error(f"--chat-template (SPARKINFER_CHAT_TEMPLATE): {exc}")


def _add_behaviour_flags(parser: argparse.ArgumentParser, d: GatewayConfig) -> None:
    """vLLM's switches the gateway honours: tools under tool_choice none, request templates, drain, access log."""
    parser.add_argument("--exclude-tools-when-tool-choice-none", action="store_true",
                        default=env_switch(parser, "SPARKINFER_EXCLUDE_TOOLS_WHEN_TOOL_CHOICE_NONE",
                                           d.exclude_tools_when_tool_choice_none),
                        help="leave the tools out of the prompt when tool_choice is 'none' (as vLLM's flag; by "
                             "default the model still sees them) (SPARKINFER_EXCLUDE_TOOLS_WHEN_TOOL_CHOICE_NONE)")
    parser.add_argument("--trust-request-chat-template", action="store_true",
                        default=env_switch(parser, "SPARKINFER_TRUST_REQUEST_CHAT_TEMPLATE",
                                           d.trust_request_chat_template),
                        help="render the chat_template a request sends (vLLM's flag of the same name; off: 400), "
                             "only for trusted clients: a template can loop for hours "
                             "(SPARKINFER_TRUST_REQUEST_CHAT_TEMPLATE)")
    parser.add_argument("--force-include-usage", action="store_true",
                        default=env_switch(parser, "SPARKINFER_FORCE_INCLUDE_USAGE", d.force_include_usage),
                        help="every /v1 stream carries usage, in each chunk and a final usage chunk, whatever its "
                             "stream_options, as vLLM's --enable-force-include-usage (SPARKINFER_FORCE_INCLUDE_USAGE)")
    parser.add_argument("--chat-template", default=_env("SPARKINFER_CHAT_TEMPLATE", ""),
                        help="the chat template to render every chat with, in place of the checkpoint's: a Jinja file, "
                             "or the template itself, as vLLM's flag (SPARKINFER_CHAT_TEMPLATE)")
    parser.add_argument("--default-chat-template-kwargs", default=_env("SPARKINFER_DEFAULT_CHAT_TEMPLATE_KWARGS", ""),
                        help="chat template variables of every chat request, under its own chat_template_kwargs, "
                             "as vLLM's flag of the same name: '{\"enable_thinking\": false}' turns thinking off "
                             "unless a request turns it on (SPARKINFER_DEFAULT_CHAT_TEMPLATE_KWARGS)")
    parser.add_argument("--drain-grace-seconds", type=float,
                        default=env_number(parser, "SPARKINFER_DRAIN_GRACE_S", d.drain_grace_s),
                        help="on SIGTERM or SIGINT, stop accepting connections and give the requests in flight this "
                             f"long to finish before they are cut (SPARKINFER_DRAIN_GRACE_S, default "
                             f"{d.drain_grace_s:g})")
    parser.add_argument("--disable-access-log", action="store_true",
                        default=not env_switch(parser, "SPARKINFER_ACCESS_LOG", d.access_log),
                        help="no log line per request (as vLLM's --disable-uvicorn-access-log; by default each "
                             "request is logged with its status, time and X-Request-Id) (SPARKINFER_ACCESS_LOG=0)")
    parser.add_argument("--disable-access-log-for-endpoints",
                        default=_env("SPARKINFER_DISABLE_ACCESS_LOG_FOR_ENDPOINTS", ""),
                        help="comma-separated paths whose requests get no access log line, such as /health,/metrics "
                             "(as vLLM's flag of the same name) (SPARKINFER_DISABLE_ACCESS_LOG_FOR_ENDPOINTS)")
