"""Gateway process: typed API errors and their OpenAI wire shape {"error": {message, type, param, code}}."""
from __future__ import annotations

from typing import Callable, Optional, Sequence

from gateway import json_out


# The longest error message sent back. A message may quote what the client sent (the model it named, a role, a
# duration, a format), which may be as long as a body: "The model '...' does not exist" came back 1 MB long for a
# 1 MB model name, on every route. schema_errors bounds the schema's own messages, at 1000.
MAX_MESSAGE_CHARS = 4000


def bounded(message: str) -> str:
    """message, or past MAX_MESSAGE_CHARS its start and its end around " ... " (the end often names the fix)."""
    if not isinstance(message, str) or len(message) <= MAX_MESSAGE_CHARS:
        return message
    keep = (MAX_MESSAGE_CHARS - 5) // 2
    return f"{message[:keep]} ... {message[-keep:]}"


class ApiError(Exception):
    """An error a client sees; `status` is the HTTP status, the rest fills OpenAI's error object. Its message is
    bounded (MAX_MESSAGE_CHARS), also when a route rewords it later."""

    status = 500
    type = "server_error"
    code: Optional[str] = None

    def __init__(self, message: str, param: Optional[str] = None, code: Optional[str] = None,
                 headers: Optional[dict] = None):
        self.message = message
        super().__init__(self.message)
        self.param = param
        if code is not None:
            self.code = code
        self.headers = dict(headers or {})

    @property
    def message(self) -> str:
        """The error's message, as bounded() keeps it."""
        return self._message

    @message.setter
    def message(self, text: str) -> None:
        self._message = bounded(text)

    def to_dict(self) -> dict:
        """OpenAI's error body: {"error": {message, type, param, code}}."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}

    def to_json(self) -> bytes:
        """to_dict() as compact JSON bytes."""
        return json_out.dumps(self.to_dict())


def renamed(exc: ApiError, renames: Sequence, param_renames: Sequence = ()) -> ApiError:
    """exc, raised on the body a request was translated into, naming the fields the client sent: each (pattern,
    replacement) of renames substituted in its message and param, each of param_renames in its param alone. A route
    answers in its own API's words (LM Studio's max_output_tokens, SGLang's max_new_tokens), never in those of the
    route it runs as."""
    for pattern, name in renames:
        exc.message = pattern.sub(name, exc.message)
        exc.param = pattern.sub(name, exc.param) if exc.param else exc.param
    for pattern, name in param_renames:
        exc.param = pattern.sub(name, exc.param) if exc.param else exc.param
    return exc


class InvalidRequest(ApiError):
    """400: the request body is malformed or a value is out of range."""
    status = 400
    type = "invalid_request_error"
    code = "invalid_value"


class Unsupported(InvalidRequest):
    """400: a well-formed request asks for something this server cannot do (never silently ignored)."""
    code = "unsupported"


class ContextLengthExceeded(InvalidRequest):
    """400: prompt + max_tokens do not fit the model's context window. The counts, when known, let another API word
    it its own way (num_prompt a lower bound when at_least; num_output the explicit limit that did not fit)."""
    code = "context_length_exceeded"
    ctx: Optional[int] = None
    num_prompt: Optional[int] = None
    num_output: Optional[int] = None
    at_least = False

    def counts(self, ctx: int, num_prompt: int, num_output: Optional[int] = None,
               at_least: bool = False) -> "ContextLengthExceeded":
        """Sets the numbers the API's message is written from (context, prompt and output tokens; at_least when the
        prompt count is a lower bound); returns self."""
        self.ctx, self.num_prompt, self.num_output, self.at_least = ctx, num_prompt, num_output, at_least
        return self


def count_past_context(parse_prompt: Callable[[], list]) -> int:
    """len(parse_prompt()), the prompt's token ids, also for a prompt past the context: the count routes (Anthropic's
    count_tokens, OpenAI's /v1/responses/input_tokens, llama-server's chat input_tokens) count it, as their servers do,
    since clients ask precisely to learn that it no longer fits. A prompt refused for its size before tokenizing (only
    a lower bound known: ContextLengthExceeded.at_least) stays the 400, as does every other error parse_prompt raises."""
    try:
        return len(parse_prompt())
    except ContextLengthExceeded as exc:
        if exc.num_prompt is None or exc.at_least:
            raise
        return exc.num_prompt


def prompt_overflow_message(ctx: int, num_prompt: int) -> str:
    """vLLM's words for a prompt that fills the context, text or token ids alike (its _validate_input through 0.15,
    as PR #33425 quotes it), which clients parse for the counts (hermes-agent's "your request has N input tokens")."""
    return (f"This model's maximum context length is {ctx} tokens. However, your request has {num_prompt} input "
            f"tokens. Please reduce the length of the input messages.")


class Unauthorized(ApiError):
    """401: missing or wrong Bearer key."""
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class Forbidden(ApiError):
    """403: the server will not do this for anyone (Ollama's answer for its cloud models while its cloud is off)."""
    status = 403
    type = "permission_error"
    code = "forbidden"


class NotFound(ApiError):
    """404: unknown model or route."""
    status = 404
    type = "not_found_error"
    code = "model_not_found"


class MethodNotAllowed(ApiError):
    """405: the route exists with another method."""
    status = 405
    type = "invalid_request_error"
    code = "method_not_allowed"


class PayloadTooLarge(ApiError):
    """413: the body is larger than the gateway accepts."""
    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class RequestTimeout(ApiError):
    """408: the request body did not arrive in time (SPARKINFER_BODY_TIMEOUT_S)."""
    status = 408
    type = "invalid_request_error"
    code = "request_timeout"


class RequestHeaderFieldsTooLarge(ApiError):
    """431: the request line or a header field is too long, or there are too many header fields."""
    status = 431
    type = "invalid_request_error"
    code = "request_header_fields_too_large"


class UnsupportedMediaType(ApiError):
    """415: the body uses a Content-Encoding this server does not decode."""
    status = 415
    type = "invalid_request_error"
    code = "unsupported_content_encoding"


class Overloaded(ApiError):
    """429: the scheduler's waiting queue is full; retry after `retry_after` seconds."""
    status = 429
    type = "rate_limit_error"
    code = "server_overloaded"

    def __init__(self, message: str, retry_after: int = 1):
        super().__init__(message, headers={"Retry-After": str(max(1, int(retry_after)))})
        self.retry_after = retry_after


class Unavailable(ApiError):
    """503: the scheduler is unreachable or its worker is down."""
    status = 503
    type = "server_unavailable"
    code = "server_unavailable"

    def __init__(self, message: str, retry_after: int = 1):
        super().__init__(message, headers={"Retry-After": str(max(1, int(retry_after)))})


class ModelUnloadable(Unavailable):
    """503: the scheduler serves a checkpoint whose tokenizer.json or chat template the gateway cannot load."""
    code = "model_unloadable"


class Timeout(ApiError):
    """504: the scheduler did not answer in time."""
    status = 504
    type = "server_error"
    code = "request_timeout"


class NotImplementedApi(ApiError):
    """501: an endpoint this engine does not provide."""
    status = 501
    type = "not_implemented"
    code = "not_implemented"


# Every embedding route's 501 opens with llama-server's words for a server that does not embed ("This server does not
# support embeddings. Start it with `--embeddings`", server-context.cpp handle_embeddings_impl), which Ollama passes
# through for a chat model's /api/embed: clients match "does not support embeddings" to tell "cannot embed" from a
# failure. The flag is no remedy here, so the reason follows instead.
EMBEDDINGS_UNSUPPORTED = "This server does not support embeddings. It runs a generative model only"

# An image sent to a model without vision opens with llama-server's words for a model served without its projector
# ("image input is not supported - hint: ... provide the mmproj", oaicompat_chat_params_parse), which Ollama passes
# through for a text model's /api/chat and /api/generate images: clients match "image input is not supported" to
# retry without the images or to mark the model text-only. The projector is no remedy here, so the reason follows.
IMAGES_UNSUPPORTED = "image input is not supported: this model server has no vision input"


class InternalError(ApiError):
    """500: a fault inside the server (never caused by what the client sent)."""
    status = 500
    type = "server_error"
    code = "internal_error"
