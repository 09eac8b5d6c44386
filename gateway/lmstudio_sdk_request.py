"""Gateway process: an LM Studio SDK prediction's creation parameter (lmstudio-python, lmstudio-js) as a chat body.

The SDK sends `{modelSpecifier, history: {messages}, predictionConfigStack: {layers: [{layerName, config: {fields:
[{key, value}]}}]}}` (lmstudio-python json_api.py PredictionEndpoint, _kv_config.py); the fields become the
/api/v0/chat/completions body LM Studio's own REST route would take, so the one generation path serves both.
"""
from __future__ import annotations

from typing import Any, Optional

from gateway import json_out
from gateway.errors import InvalidRequest

# LM Studio's KV config keys (_kv_config.py "llm.prediction") and the /api/v0 chat field each sets. A checkbox field's
# value is {"checked": bool, "value": x}: unchecked leaves the field at the server's default.
_SAMPLING_KEYS = {
    "llm.prediction.temperature": "temperature",
    "llm.prediction.maxPredictedTokens": "max_tokens",
    "llm.prediction.topKSampling": "top_k",
    "llm.prediction.topPSampling": "top_p",
    "llm.prediction.minPSampling": "min_p",
    "llm.prediction.repeatPenalty": "repeat_penalty",
    "llm.prediction.stopStrings": "stop",
    "llm.prediction.seed": "seed",
    # llama.cpp's XTC, as lmstudio-js sends it (llmPredictionConfigToKVConfig): read as llama.cpp's field is on
    # /api/v0 (refused when on: no XTC sampler here).
    "llm.prediction.llama.xtcProbability": "xtc_probability",
    "llm.prediction.llama.xtcThreshold": "xtc_threshold",
}
# Keys that tune how LM Studio's own runtime runs (threads, draft model, context overflow, tool-call stop strings):
# nothing here reads them, as LM Studio ignores the ones its engine lacks.
# The SDK's complete() template, whitespace removed.
_COMPLETE_TEMPLATE = "{%formessageinmessages%}{{message['content']}}{%endfor%}"
_IGNORED_PREFIXES = ("llm.prediction.llama.", "llm.prediction.speculativeDecoding.", "llm.prediction.mlx.")
_IGNORED_KEYS = {"llm.prediction.contextOverflowPolicy", "llm.prediction.toolCallStopStrings",
                 "llm.prediction.reasoning.parsing", "llm.prediction.promptTemplate", "llm.prediction.toolNaming"}


def config_fields(stack: Any) -> dict:
    """The predictionConfigStack's fields, key -> value, a later layer's value winning, as LM Studio merges its
    stack (apiOverride, then completeModeFormatting, ...)."""
    fields: dict = {}
    layers = stack.get("layers", []) if isinstance(stack, dict) else []
    for layer in layers if isinstance(layers, list) else []:
        config = layer.get("config") if isinstance(layer, dict) else None
        for field in (config or {}).get("fields", []) if isinstance(config, dict) else []:
            if isinstance(field, dict) and isinstance(field.get("key"), str):
                fields[field["key"]] = field.get("value")
    return fields


def _unchecked(value: Any) -> tuple[bool, Any]:
    """(set, value) of a field, a checkbox one ({"checked", "value"}) read as the SDK writes it. A checkbox's value
    false is the setting switched off: lmstudio-js writes maxTokens: false as {"checked": false, ...}
    (maybeFalseNumberToCheckboxNumeric), lmstudio-python as {"checked": true, "value": false} (_kv_config.py
    CheckboxField), both meaning no limit, no top-p, no repeat penalty."""
    if isinstance(value, dict) and "checked" in value:
        inner = value.get("value")
        return bool(value.get("checked")) and inner is not False, inner
    return True, value


def _text_of(part: dict, where: str) -> str:
    """A message part's text: "text" parts; a file (image) part is refused, as on every route of this text model."""
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return part["text"]
    if kind == "file":
        raise InvalidRequest("image input is not supported: this model server has no vision input", param=where)
    raise InvalidRequest(f"unsupported message part type {kind!r}", param=where)


def _message(message: Any, i: int) -> list[dict]:
    """One SDK chat message ({role, content: [parts]}) as the OpenAI messages it stands for: an assistant's
    toolCallRequest parts become its tool_calls, a tool message's toolCallResult parts one tool message each."""
    where = f"history.messages[{i}]"
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        raise InvalidRequest("a message is {role, content: [parts]}", param=where)
    role, parts = message.get("role"), message["content"]
    if role == "tool":
        return [{"role": "tool", "tool_call_id": part.get("toolCallId") or "", "content": part.get("content", "")}
                for part in parts if isinstance(part, dict) and part.get("type") == "toolCallResult"]
    texts, calls = [], []
    for j, part in enumerate(parts):
        if isinstance(part, dict) and part.get("type") == "toolCallRequest":
            calls.append(_tool_call(part.get("toolCallRequest"), len(calls)))
        elif isinstance(part, dict):
            texts.append(_text_of(part, f"{where}.content[{j}]"))
    out: dict = {"role": role, "content": "".join(texts)}
    if calls:
        out["tool_calls"] = calls
    return [out]


def _tool_call(request: Any, k: int) -> dict:
    """An SDK toolCallRequest ({type: function, id, name, arguments: object}) as an OpenAI tool call."""
    request = request if isinstance(request, dict) else {}
    return {"id": request.get("id") or f"call_{k}", "type": "function",
            "function": {"name": request.get("name", ""),
                         "arguments": json_out.dumps(request.get("arguments") or {}).decode()}}


def _structured(value: Any) -> dict:
    """llm.prediction.structured ({type: none | json | gbnf, jsonSchema, gbnfGrammar}) as the chat body's output
    constraint."""
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "json":
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": "schema", "schema": value.get("jsonSchema") or {}}}}
    if kind == "gbnf":
        return {"grammar": value.get("gbnfGrammar", "")}
    return {}


def _tools(value: Any) -> dict:
    """llm.prediction.tools ({type: none | toolArray, tools: [OpenAI function tools]}) as the chat body's tools."""
    if isinstance(value, dict) and value.get("type") == "toolArray" and value.get("tools"):
        return {"tools": value["tools"]}
    return {}


def chat_body(param: Any, model: str, fields: Optional[dict] = None) -> dict:
    """The /api/v0/chat/completions body of a predict channel's creation parameter (history and config fields)."""
    if not isinstance(param, dict):
        raise InvalidRequest("the predict channel's creation parameter is an object", param="creationParameter")
    history = param.get("history")
    messages = history.get("messages") if isinstance(history, dict) else None
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("history.messages must be a non-empty list", param="history.messages")
    body: dict = {"model": model, "messages": [m for i, msg in enumerate(messages) for m in _message(msg, i)]}
    fields = config_fields(param.get("predictionConfigStack")) if fields is None else fields
    for key, value in fields.items():
        if key in _SAMPLING_KEYS:
            checked, value = _unchecked(value)
            if checked and value is not None:
                body[_SAMPLING_KEYS[key]] = value
        elif key == "llm.prediction.structured":
            body.update(_structured(value))
            if _structured(value):
                # The SDK's structured result is the JSON read from every fragment's text (lmstudio-python
                # PredictionEndpoint: json.loads of the joined content; lmstudio-js: its parser of `content`), so no
                # thinking comes before it, as on LM Studio, whose grammar covers the whole output
                # (lmstudio-bug-tracker#575).
                body["chat_template_kwargs"] = {"enable_thinking": False}
        elif key == "llm.prediction.tools":
            body.update(_tools(value))
        elif key == "llm.prediction.logProbs":
            # Its fragments have no place for logprobs: unchecked (lmstudio-js's default) is no request.
            if _unchecked(value)[0] and _unchecked(value)[1]:
                raise InvalidRequest("llm.prediction.logProbs: the SDK's fragments carry no logprobs here",
                                     param=key)
        elif key not in _IGNORED_KEYS and not key.startswith(_IGNORED_PREFIXES):
            raise InvalidRequest(f"unsupported prediction config field {key!r}", param=key)
    return body


def raw_prompt(fields: dict, body: dict) -> Optional[str]:
    """The SDK's complete() prompt, None for a chat. complete() sends the prompt as one user message with a
    completeModeFormatting layer whose template writes each message's content as it is (lmstudio-python _kv_config.py
    _COMPLETE_MODE_TEMPLATE); that is a raw prompt here. Another template is refused: the served model's own chat
    template is the only one rendered."""
    template = fields.get("llm.prediction.promptTemplate")
    if template is None:
        return None
    jinja = template.get("jinjaPromptTemplate") if isinstance(template, dict) else None
    source = jinja.get("template", "") if isinstance(jinja, dict) else None
    if "".join(str(source).split()) != _COMPLETE_TEMPLATE:
        raise InvalidRequest("llm.prediction.promptTemplate: only the model's own chat template or the SDK's "
                             "complete() template is served, not a custom one", param="llm.prediction.promptTemplate")
    return "".join(message.get("content", "") for message in body["messages"])
