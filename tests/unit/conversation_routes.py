"""Test support: a generated OpenAI conversation (tests/unit/conversation_gen.py) written as another API's request,
with the OpenAI messages and fields that API's reference server hands its chat template for it, or None where the
API cannot say it. Anthropic as vLLM's anthropic/serving.py maps it (a thinking block the turn's reasoning, tool_use
blocks its calls with their input as arguments, tool_result blocks tool messages, their text blocks joined by
newlines; system text blocks joined); Responses as vLLM's responses/utils.py construct_input_messages (instructions
the system message, a reasoning item the next turn's reasoning, function_call items its calls,
function_call_output items tool messages); Ollama's /api/chat as its api/types.go Message (content a string,
thinking the reasoning, tool_name the result's name, arguments an object). On Ollama and Responses several system
(developer) messages are folded into the first, as Ollama's Qwen3.5 renderer does (Codex sends a developer message a
turn, which the Qwen3.5 template refuses past the first). Ollama's /api/generate and LM Studio's /api/v1/chat take a
system prompt and one user prompt: the conversation's first system message and last user turn."""
from __future__ import annotations

import copy
import json


def _text(content) -> str:
    """A content's text: a string, or its parts' texts side by side (as the template writes them)."""
    if isinstance(content, list):
        return "".join(part["text"] for part in content)
    return content or ""


def _arguments(arguments) -> dict:
    return (json.loads(arguments) if arguments else {}) if isinstance(arguments, str) else arguments


def _reasoning(message: dict):
    return next((message[key] for key in ("reasoning_content", "reasoning", "thinking") if key in message), None)


def _switch(fields: dict):
    return (fields.get("chat_template_kwargs") or {}).get("enable_thinking")


def _openai_call(call: dict) -> dict:
    return {"id": call["id"], "type": "function",
            "function": {"name": call["function"]["name"], "arguments": _arguments(call["function"]["arguments"])}}


def _prefill(messages: list, fields: dict):
    """(expressible, expected fields) for an API whose final assistant message is a prefill it continues, and whose
    only template switch is the thinking one."""
    if fields.get("add_generation_prompt") is not None and not fields.get("continue_final_message") or \
            set(fields.get("chat_template_kwargs") or {}) - {"enable_thinking"}:
        return False, {}
    return True, ({"continue_final_message": True, "add_generation_prompt": False}
                  if messages[-1]["role"] == "assistant" else {})


def anthropic(messages: list, fields: dict):
    """(path, body, expected messages, expected fields) of /v1/messages, or None."""
    ok, expected_fields = _prefill(messages, fields)
    # (Anthropic refuses a prefill that ends in whitespace)
    trailing = expected_fields and _text(messages[-1]["content"]).rstrip() != _text(messages[-1]["content"])
    if not ok or trailing or any(
            m["role"] in ("system", "developer") for m in messages[1:]) or any(
            m["role"] in ("user", "tool") and not _text(m["content"]).strip() for m in messages):
        return None
    body, expected = {"max_tokens": 1, "messages": []}, []
    if fields.get("tools"):
        body["tools"] = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
                          "input_schema": t["function"].get("parameters") or {"type": "object", "properties": {}}}
                         for t in fields["tools"]]
        expected_fields["tools"] = [{"type": "function", "function": {
            "name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}
            for t in body["tools"]]
    if _switch(fields) is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": 1024} if _switch(fields) else {"type": "disabled"}
        body["max_tokens"] = 2048
        expected_fields["chat_template_kwargs"] = {"enable_thinking": _switch(fields)}
    if fields.get("reasoning_effort"):
        # vLLM's _handle_output_config: output_config.effort is the reasoning_effort.
        body["output_config"] = {"effort": fields["reasoning_effort"]}
        expected_fields["reasoning_effort"] = fields["reasoning_effort"]
    rest = messages
    if messages[0]["role"] in ("system", "developer"):
        rest = messages[1:]
        body["system"] = copy.deepcopy(messages[0]["content"])
        if body["system"]:
            # An empty system string is no system prompt (vLLM tests `if request.system`).
            expected.append({"role": "system", "content": _text(messages[0]["content"])})
    for message in rest:
        if not _anthropic_turn(message, body["messages"], expected):
            return None
    return "/v1/messages", body, expected, expected_fields


def _anthropic_turn(message: dict, turns: list, expected: list) -> bool:
    role = message["role"]
    if role == "user" and turns and isinstance(turns[-1]["content"], list) and \
            turns[-1]["content"][-1]["type"] == "tool_result":
        # After the tool results, in their message, as Claude Code sends a turn's results and the user's words.
        content = message["content"]
        turns[-1]["content"] += copy.deepcopy(content) if isinstance(content, list) else [{"type": "text", "text": content}]
        expected.append({"role": "user", "content": copy.deepcopy(content)})
    elif role == "user":
        turns.append({"role": "user", "content": copy.deepcopy(message["content"])})
        expected.append({"role": "user", "content": copy.deepcopy(message["content"])})
    elif role == "tool":
        block = {"type": "tool_result", "tool_use_id": message["tool_call_id"],
                 "content": copy.deepcopy(message["content"])}
        if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list) and \
                all(b["type"] == "tool_result" for b in turns[-1]["content"]):
            turns[-1]["content"].append(block)
        else:
            turns.append({"role": "user", "content": [block]})
        expected.append({"role": "tool", "tool_call_id": message["tool_call_id"],
                         "content": "\n".join(p["text"] for p in message["content"])
                         if isinstance(message["content"], list) else message["content"]})
    else:
        blocks, reasoning = [], _reasoning(message)
        if reasoning:
            blocks.append({"type": "thinking", "thinking": reasoning, "signature": "sig"})
        text = _text(message.get("content"))
        if text:
            blocks.append({"type": "text", "text": text})
        calls = [_openai_call(call) for call in message.get("tool_calls") or []]
        blocks += [{"type": "tool_use", "id": c["id"], "name": c["function"]["name"], "input": c["function"]["arguments"]}
                   for c in calls]
        if not blocks:
            return False
        turns.append({"role": "assistant", "content": blocks})
        expected.append(_assistant(text, reasoning, calls))
    return True


def _assistant(text: str, reasoning: str, calls: list) -> dict:
    """The OpenAI-shaped assistant message a route's assistant turn stands for (reasoning / calls only when set)."""
    out = {"role": "assistant", "content": text}
    if reasoning:
        out["reasoning_content"] = reasoning
    if calls:
        out["tool_calls"] = calls
    return out


def responses(messages: list, fields: dict):
    """(path, body, expected messages, expected fields) of /v1/responses, or None."""
    if messages[-1]["role"] == "assistant" or "chat_template_kwargs" in fields:
        return None
    body, expected, expected_fields = {"max_output_tokens": 16, "input": []}, [], {}
    if fields.get("tools"):
        body["tools"] = [{"type": "function", **t["function"]} for t in fields["tools"]]
        expected_fields["tools"] = fields["tools"]
    if fields.get("reasoning_effort"):
        body["reasoning"] = {"effort": fields["reasoning_effort"]}
        expected_fields["reasoning_effort"] = fields["reasoning_effort"]
        expected_fields["chat_template_kwargs"] = {"enable_thinking": True}
    for message in messages:
        item = _responses_items(message, body["input"], expected)
        if item is False:
            return None
    return "/v1/responses", body, one_system(expected), expected_fields


def _responses_items(message: dict, items: list, expected: list):
    role, content = message["role"], message.get("content")
    if role in ("system", "developer", "user"):
        parts = [{"type": "input_text", "text": p["text"]} for p in content] if isinstance(content, list) else content
        items.append({"role": role, "content": parts})
        expected.append({"role": "system" if role == "developer" else role, "content": copy.deepcopy(content)})
    elif role == "tool":
        items.append({"type": "function_call_output", "call_id": message["tool_call_id"], "output": _text(content)})
        expected.append({"role": "tool", "tool_call_id": message["tool_call_id"], "content": _text(content)})
    else:
        reasoning, text = _reasoning(message), _text(content)
        if reasoning:
            items.append({"type": "reasoning", "id": f"rs_{len(items)}", "summary": [],
                          "content": [{"type": "reasoning_text", "text": reasoning}]})
        if text:
            items.append({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": text, "annotations": []}]})
        calls = [_openai_call(call) for call in message.get("tool_calls") or []]
        items += [{"type": "function_call", "call_id": c["id"], "name": c["function"]["name"],
                   "arguments": json.dumps(c["function"]["arguments"], ensure_ascii=False)} for c in calls]
        if not (reasoning or text or calls):
            return False
        expected.append(_assistant(text, reasoning, calls))
    return True


def ollama(messages: list, fields: dict):
    """(path, body, expected messages, expected fields) of /api/chat, or None."""
    ok, expected_fields = _prefill(messages, fields)
    if not ok or "reasoning_effort" in fields or (expected_fields and not _text(messages[-1]["content"])):
        # (an empty prefill is left open after the template's whitespace, as Ollama's renderers leave it)
        return None
    body = {"stream": False, "options": {"num_predict": 1}, "messages": []}
    if fields.get("tools"):
        body["tools"] = expected_fields["tools"] = fields["tools"]
    if _switch(fields) is not None:
        body["think"] = _switch(fields)
        expected_fields["chat_template_kwargs"] = {"enable_thinking": _switch(fields)}
    expected = []
    for message in messages:
        role = "system" if message["role"] == "developer" else message["role"]
        turn = {"role": role, "content": _text(message.get("content"))}
        out = dict(turn)
        if role == "assistant":
            # thinking is `omitempty` in Ollama's api.Message: an empty one is none.
            if _reasoning(message):
                turn["thinking"] = out["reasoning_content"] = _reasoning(message)
            if message.get("tool_calls"):
                out["tool_calls"] = [_openai_call(call) for call in message["tool_calls"]]
                turn["tool_calls"] = [{"function": c["function"]} for c in out["tool_calls"]]
        if role == "tool" and message.get("name"):
            turn["tool_name"] = out["name"] = message["name"]
        body["messages"].append(turn)
        expected.append(out)
    return "/api/chat", body, one_system(expected), expected_fields


def one_system(messages: list) -> list:
    """Every system and developer message folded into one leading system message (their trimmed texts joined by a
    blank line), as Ollama's Qwen3.5 renderer folds them; the messages themselves when there is nothing to fold."""
    systems = [m for m in messages if m["role"] in ("system", "developer")]
    if not systems or (len(systems) == 1 and messages[0]["role"] == "system"):
        return messages
    text = "\n\n".join(_text(m.get("content")).strip() for m in systems if _text(m.get("content")).strip())
    return [{"role": "system", "content": text}] + [m for m in messages if m["role"] not in ("system", "developer")]


def _one_turn(messages: list, fields: dict):
    """(system text or None, the last user turn's text, expected fields) for an API that takes a system prompt and
    one user prompt, or None (an empty prompt, or a switch the API has no word for)."""
    if set(fields) - {"tools", "chat_template_kwargs"} or set(fields.get("chat_template_kwargs") or {}) - \
            {"enable_thinking"}:
        return None
    users = [m for m in messages if m["role"] == "user"]
    system = _text(messages[0]["content"]) if messages[0]["role"] in ("system", "developer") else None
    if not users or not _text(users[-1]["content"]).strip():
        return None
    expected_fields = {"chat_template_kwargs": {"enable_thinking": _switch(fields)}} if _switch(fields) is not None \
        else {}
    return system, _text(users[-1]["content"]), expected_fields


def ollama_generate(messages: list, fields: dict):
    """(path, body, expected messages, expected fields) of /api/generate: `system` and `prompt` as the system and
    user turns of the model's template (Ollama's GenerateHandler; an empty system is none), think the switch."""
    one = _one_turn(messages, fields)
    if one is None:
        return None
    system, prompt, expected_fields = one
    body = {"prompt": prompt, "stream": False, "options": {"num_predict": 1}}
    if system is not None:
        body["system"] = system
    if expected_fields:
        body["think"] = _switch(fields)
    expected = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return "/api/generate", body, expected, expected_fields


def lmstudio_chat(messages: list, fields: dict):
    """(path, body, expected messages, expected fields) of LM Studio's /api/v1/chat: system_prompt and input as the
    system and user turns (lmstudio.ai/docs/developer/rest/chat), reasoning "on" / "off" the switch."""
    one = _one_turn(messages, fields)
    if one is None:
        return None
    system, prompt, expected_fields = one
    body = {"input": prompt, "max_output_tokens": 1}
    if system is not None:
        body["system_prompt"] = system
    if expected_fields:
        body["reasoning"] = "on" if _switch(fields) else "off"
    expected = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    return "/api/v1/chat", body, expected, expected_fields


ROUTES = {"anthropic": anthropic, "responses": responses, "ollama": ollama, "ollama-generate": ollama_generate,
          "lmstudio-v1": lmstudio_chat}
