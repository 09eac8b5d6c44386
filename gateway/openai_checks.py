"""Gateway process: OpenAI /v1 checks shared by chat and completions: token limits, prompt size, tools."""
from __future__ import annotations

from typing import Optional

from gateway.chat import THINKING_PARTS, TOOL_MEDIA_PARTS, thinking_text
from gateway.errors import ContextLengthExceeded, InvalidRequest, Unsupported, prompt_overflow_message
from gateway.llama_cpp_limits import alias_no_limit, n_predict
from gateway.model import ModelCard
from gateway.structured import any_draft_schema_error, check_schema, checked
from gateway.tool_grammar import check_string_patterns, tool_call_grammar
from gateway.tool_markup import MARKUP_NAME_RE
from gateway.tool_parameters import tool_parameters

# Function names: any name the call markup can carry, on every route. vLLM (its protocol types take any string) and
# Ollama (api.ToolFunction.Name is any string; its Qwen parser reads <function=([^>]+)>) accept any name, and MCP
# clients mint names past OpenAI's 64 characters ("mcp__<server>__<tool>") and with '/' (MCP's SEP-986) or spaces.
# Only what the markup cannot carry is refused: a '>' ends the tag, a line break or control character breaks it,
# and the name is read trimmed. (OpenAI's own API and Anthropic's are stricter: ^[a-zA-Z0-9_-]{1,64}$ / {1,128}$.)
TOOL_NAME_RE = MARKUP_NAME_RE


def tool_name_error(name: str, param: str, what: str = "") -> InvalidRequest:
    """The 400 for a function name the call markup cannot carry (TOOL_NAME_RE), at `param` (`what`: a note after
    the name)."""
    return InvalidRequest(f"{param} {name!r}{what} cannot be written in the model's tool calls (<function=NAME>): no "
                          f"'>', line break or control character, and no space at either end", param=param)


def check_prompt_size(text: str, card: ModelCard, ctx: int, param: str) -> None:
    """400 context_length_exceeded at once when the text alone is too many bytes to fit ctx tokens (no tokenizing)."""
    at_least = card.min_prompt_tokens(text)
    if at_least >= ctx:
        raise ContextLengthExceeded(
            f"This model's maximum context length is {ctx} tokens. However, your prompt contains at least "
            f"{at_least} tokens, which leaves no room for a completion. Please reduce the length of the prompt.",
            param=param).counts(ctx, at_least, at_least=True)


def output_overflow_message(ctx: int, num_prompt: int, requested: int, param: str = "max_tokens") -> str:
    """vLLM's words for a prompt plus an output limit past the context, which clients parse to shrink the limit or
    trim history: its older sentence ("(P in the messages, C in the completion)", vllm#20409) and its current one
    since vllm#36197 ("requested C output tokens and your prompt contains at least P input tokens"; hermes-agent and
    opencode parse it), then the largest limit that fits."""
    total = num_prompt + requested
    return (f"This model's maximum context length is {ctx} tokens. However, you requested {total} tokens "
            f"({num_prompt} in the messages, {requested} in the completion). Please reduce the length of the messages "
            f"or completion. You requested {requested} output tokens and your prompt contains at least {num_prompt} "
            f"input tokens, for a total of at least {total} tokens. With this prompt, {param} can be at most "
            f"{ctx - num_prompt}.")


def resolve_max_tokens(requested: Optional[int], num_prompt: int, card: ModelCard, default: Optional[int],
                       param: str, prompt_param: str, cap: bool = False) -> int:
    """The generation limit; 400 context_length_exceeded when the prompt (+ an explicit limit) cannot fit, but for
    llama.cpp's n_predict and a limit the calling API reads as a cap (`cap`: LM Studio's max_tokens), which stop at
    the room the prompt leaves."""
    ctx = card.max_context_len
    if num_prompt >= ctx:
        raise ContextLengthExceeded(prompt_overflow_message(ctx, num_prompt),
                                    param=prompt_param).counts(ctx, num_prompt)
    room = ctx - num_prompt
    if requested is None:
        return room if default is None else min(default, room)
    if (cap or param == "n_predict") and requested > room:
        # llama.cpp's n_predict is a cap: past the room left the output stops where the context is full (its
        # process_token: "stopped due to running out of context", stop_type limit, truncated), never a 400; so is
        # LM Studio's maxTokens ("tokens to predict at most"; a full context is its stop reason contextLengthReached).
        return room
    if num_prompt + requested > ctx:
        raise ContextLengthExceeded(output_overflow_message(ctx, num_prompt, requested, param),
                                    param=param).counts(ctx, num_prompt, requested)
    return requested


def chat_max_tokens(body: dict) -> tuple[Optional[int], str]:
    """(explicit limit or None, its field); llama.cpp's n_predict wins over max_completion_tokens, which wins over
    max_tokens; each must be >= 1, but a llama.cpp client's -1 (alias_no_limit), its no limit."""
    sent, value = n_predict(alias_no_limit(body))
    if sent:
        return value, "n_predict"
    for param in ("max_tokens", "max_completion_tokens"):
        value = body.get(param)
        if value is not None and value < 1:
            raise InvalidRequest(f"{param} must be at least 1, got {value}", param=param)
    if body.get("max_completion_tokens") is not None:
        return body["max_completion_tokens"], "max_completion_tokens"
    return body.get("max_tokens"), "max_tokens"


def completion_max_tokens(body: dict, echo: bool) -> tuple[Optional[int], str, bool]:
    """(the explicit limit or None, its field, whether one was sent: an absent one is OpenAI's default of 16, a null
    one no explicit limit); >= 1, or 0 with echo (the prompt only), or a llama.cpp client's -1 (alias_no_limit).
    llama.cpp's n_predict wins over max_tokens."""
    sent, value = n_predict(alias_no_limit(body), allow_zero=echo)
    if sent:
        return value, "n_predict", True
    value = body.get("max_tokens")
    if value is not None and value < 1 and not (echo and value == 0):
        raise InvalidRequest(f"max_tokens must be at least 1 (0 only with echo: true), got {value}",
                             param="max_tokens")
    return value, "max_tokens", "max_tokens" in body


def null_max_tokens_as_default(body):
    """An explicit max_tokens null on /v1/completions is the default of 16, as an absent one: vLLM's
    CompletionRequest.normalize_null_max_tokens (vLLM #45491; its Rust frontend's #47166 calls the old reading,
    up to the context, runaway generation). llama.cpp's /completion and LM Studio's max_tokens -1 still reach
    parse_completion as null, their "no limit"."""
    if isinstance(body, dict) and "max_tokens" in body and body["max_tokens"] is None:
        return {key: value for key, value in body.items() if key != "max_tokens"}
    return body


def check_tools(tools: Optional[list], param: str = "tools") -> None:
    """400 for a function name the call markup cannot carry (TOOL_NAME_RE). A name offered twice is served, as OpenAI,
    vLLM and Ollama serve it (the template lists both; a call is read and forced by the first one's schema)."""
    for i, tool in enumerate(tools or []):
        name = tool["function"]["name"]
        if not TOOL_NAME_RE.match(name):
            raise tool_name_error(name, f"{param}[{i}].function.name")


def check_function_parameters(tools: Optional[list]) -> None:
    """OpenAI's 400 for a tool whose parameters are no JSON Schema, whatever tool_choice says (a tool the model may call
    is described to it by that schema): "Invalid schema for function 'f': ...", code invalid_function_parameters.
    Parameters some draft accepts pass (draft-04's boolean exclusiveMinimum under a 2020-12 $schema)."""
    for i, tool in enumerate(tools or []):
        function = tool["function"]
        error = None if function.get("parameters") is None else any_draft_schema_error(function["parameters"])
        if error is not None:
            raise InvalidRequest(f"Invalid schema for function '{function['name']}': {error}",
                                 param=f"tools[{i}].function.parameters", code="invalid_function_parameters")


def check_tool_schemas(tools: list) -> None:
    """Checks each tool's parameters schema (check_schema), and that every name in its `required` has a schema in
    properties: a forced call could not supply one without. InvalidRequest naming tools[i].function.parameters."""
    for i, tool in enumerate(tools):
        parameters = tool["function"].get("parameters")
        if parameters is None:
            continue
        param = f"tools[{i}].function.parameters"
        check_schema(parameters, param)
        parameters = tool_parameters(tool["function"])
        missing = set(parameters.get("required") or []) - set(parameters.get("properties") or {})
        if missing:
            raise InvalidRequest(f"{param}: required parameter '{sorted(missing)[0]}' has no schema in properties, "
                                 f"so a forced call cannot supply it", param=param)


def tool_constraint(body: dict, card: ModelCard, tools: Optional[list], force: Optional[str]):
    """The grammar of a forced tool call (None when not forced); checked before any rendering."""
    if force is None:
        return None
    check_tool_schemas(tools)
    grammar = tool_call_grammar(tools, force or None, body.get("parallel_tool_calls") is not False, card)
    # The parameter's own check first: it names the pattern, where the whole grammar's only finds no output.
    check_string_patterns(tools, card)
    return checked(grammar, card, "tools")


def check_content(messages: list) -> None:
    """400 for a message without the content its role needs, or a content part that is not text. A tool result may
    have none (a tool that returned nothing): vLLM reads its null content as no parts, an empty result."""
    for i, message in enumerate(messages):
        content = message.get("content")
        if content is None and message["role"] not in ("assistant", "tool"):
            raise InvalidRequest(f"messages[{i}].content is required for role '{message['role']}'",
                                 param=f"messages[{i}].content")
        for j, part in enumerate(content if isinstance(content, list) else []):
            check_part(part, f"messages[{i}].content[{j}]", message["role"])


# Content parts read as text, as vLLM's chat_utils reads them (part type -> the key holding the text): OpenAI's text
# and refusal parts (an assistant turn's), and the Responses API's input_text / output_text that clients carry over.
TEXT_PARTS = {"text": "text", "input_text": "text", "output_text": "text", "refusal": "refusal"}


def check_part(part: dict, where: str, role: str) -> None:
    """400 unsupported for a content part that is not text (images, audio) but in a tool message (there it is read as a
    line saying it was left out); 400 for a text part without its string, and for a thinking part outside an
    assistant turn or without exactly one of its strings (SGLang's checks)."""
    if role == "tool" and part.get("type") in TOOL_MEDIA_PARTS:
        return
    if part.get("type") in THINKING_PARTS:
        if role != "assistant":
            raise InvalidRequest(f"{where}: thinking content parts are only valid in assistant messages",
                                 param=f"{where}.type")
        if (part.get("thinking") is None) == (part.get("text") is None) or thinking_text(part) is None:
            raise InvalidRequest(f"{where}: a {part['type']} part needs exactly one string: 'thinking' or 'text'",
                                 param=f"{where}.thinking")
        return
    key = TEXT_PARTS.get(part.get("type"))
    if key is None:
        raise Unsupported(f"{where}: only text parts are supported (got type '{part.get('type')}')",
                          param=f"{where}.type")
    if not isinstance(part.get(key), str):
        raise InvalidRequest(f"{where}: a {part['type']} part needs a string '{key}'", param=f"{where}.{key}")


def check_min_tokens(value: int, max_tokens: int) -> None:
    """vLLM's words (SamplingParams._verify_args) for a min_tokens above the max_tokens a request resolved to."""
    if value > max_tokens:
        raise InvalidRequest(f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {value}.",
                             param="min_tokens")


def vocab_ids(card, tokens: list) -> list:
    """A detokenize body's ids (the schema made them non-negative integers), 400 for one past the vocabulary."""
    if any(t >= card.tokenizer_vocab_size for t in tokens):
        raise InvalidRequest(f"token ids must be in [0, {card.tokenizer_vocab_size})", param="tokens")
    return tokens
