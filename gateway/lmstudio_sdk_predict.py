"""Gateway process: one LM Studio SDK "predict" channel, run over the generation path as LM Studio's REST routes are.

The SDK (lmstudio-python json_api.py PredictionEndpoint.iter_message_events) reads `fragment` messages
({content, tokensCount, containsDrafted, reasoningType}), `toolCallGenerationStart` / `toolCallGenerationEnd`
({toolCallRequest: {type: function, id, name, arguments}}) and a last `success` ({stats, modelInfo, loadModelConfig,
predictionConfig}); `PredictionResult.content` is every fragment's content joined, so the thinking comes between
the `<think>` / `</think>` fragments LM Studio sends as reasoningStartTag / reasoningEndTag.
"""
from __future__ import annotations

import re
import time
from typing import Awaitable, Callable, Optional

import orjson

from gateway.chat_prompt import prefill_final_assistant
from gateway.engine import Engine, Generation
from gateway.errors import ApiError, renamed
from gateway.lmstudio import lmstudio_body
from gateway.lmstudio_sdk_request import chat_body, config_fields, raw_prompt
from gateway.lmstudio_shape import stats as rest_stats, stop_reason
from gateway.model import ModelCard
from gateway.offload import run_cpu
from gateway.openai import parse_chat
from gateway.openai_completion import parse_completion
from gateway.openai_shape import ChatShaper
from gateway.repetition_stop import refuse_repetition_stop

Send = Callable[[dict], Awaitable[None]]

# The /api/v0 chat fields a prediction runs as, and the SDK's names for them (lmstudio_sdk_request._SAMPLING_KEYS):
# an error names what the client sent (each /v1 name as a whole field name, never inside one already renamed).
_RENAMES = [(re.compile(r"(?<![\w.])messages(?=\[)|(?<=')messages(?=')"), "history.messages"),
            (re.compile(r"(?<=')stop(?=['\[])"), "llm.prediction.stopStrings")] + [
    (re.compile(r"(?<![\w.])(?P<q>'?)" + name + r"(?P=q)(?![\w\[])"), r"\g<q>llm.prediction." + sdk + r"\g<q>")
    for name, sdk in [("max_(?:completion_)?tokens", "maxPredictedTokens"), ("temperature", "temperature"),
                      ("top_k", "topKSampling"), ("top_p", "topPSampling"), ("min_p", "minPSampling"),
                      ("repetition_penalty", "repeatPenalty"), ("repeat_penalty", "repeatPenalty"),
                      ("seed", "seed"), ("response_format", "structured"), ("grammar", "structured"),
                      ("tools", "tools"), ("xtc_probability", "llama.xtcProbability"),
                      ("xtc_threshold", "llama.xtcThreshold")]]
_PARAM_RENAMES = [(re.compile(r"^messages$"), "history.messages"),
                  (re.compile(r"^stop(?=$|\[)"), "llm.prediction.stopStrings")]


def fragment(content: str, num_tokens: int, reasoning_type: str = "none") -> dict:
    """One `fragment` channel message. isStructural marks the <think> / </think> tags, which lmstudio-js requires on
    every fragment (its llmPredictionFragmentSchema) and leaves out of a result's reasoningContent and
    nonReasoningContent (OngoingPrediction.collect)."""
    structural = reasoning_type in ("reasoningStartTag", "reasoningEndTag")
    return {"type": "fragment", "fragment": {"content": content, "tokensCount": num_tokens, "containsDrafted": False,
                                             "reasoningType": reasoning_type, "isStructural": structural}}


async def start_prediction(engine: Engine, param, card: ModelCard, name: str):
    """(gen, shaper or None for a raw completion, the config fields) of a predict channel's creation parameter;
    raises the ApiError its body gets on LM Studio's /api/v0 routes, naming the SDK's fields."""
    try:
        return await _start(engine, param, card, name)
    except ApiError as exc:
        raise renamed(exc, _RENAMES, _PARAM_RENAMES) from None


async def _start(engine: Engine, param, card: ModelCard, name: str):
    fields = config_fields(param.get("predictionConfigStack") if isinstance(param, dict) else None)
    body = chat_body(param, name, fields)
    prompt = raw_prompt(fields, body)
    if prompt is not None:
        body = {key: value for key, value in body.items() if key != "messages"} | {"prompt": prompt}
        # No maxTokens is no limit on the SDK (up to the context), where /v1/completions' default is 16.
        body.setdefault("max_tokens", None)
        plan = await run_cpu(parse_completion, lmstudio_body(body), card, name, cap_output=True, read_thinking=False)
        shaper = None
    else:
        body = prefill_final_assistant(lmstudio_body(body))
        plan = await run_cpu(parse_chat, body, card, name, cap_output=True)
        shaper = ChatShaper(plan, card, plan.gen.req_id)
    refuse_repetition_stop(body)
    return await engine.start(plan.gen), shaper, fields


class PredictRun:
    """Sends one started generation's messages: fragments as they come, tool calls whole, then `success`."""

    def __init__(self, gen: Generation, shaper: Optional[ChatShaper], card: ModelCard, send: Send):
        self.gen, self.shaper, self.card, self.send = gen, shaper, card, send
        self.in_reasoning, self.num_sent, self.num_pending = False, 0, 0
        self.finish: Optional[str] = None
        self.matched = None

    async def run(self, received: float, model_info: dict, load_config: dict, fields: dict) -> None:
        """Streams every Delta, then the `success` message (also after a cancel: stopReason userStopped)."""
        try:
            while (delta := await self.gen.next()) is not None:
                await self._delta(delta)
        finally:
            await self.gen.close()
        usage = self.gen.usage()
        num_tokens = usage.prompt_tokens + usage.completion_tokens
        reason = "userStopped" if self.finish == "abort" else stop_reason(
            self.finish, self.matched, num_tokens, self.card.max_context_len)
        timing = rest_stats(usage.completion_tokens, received, self.gen.first_token_at, time.monotonic(), reason)
        stats = {"stopReason": reason, "tokensPerSecond": timing["tokens_per_second"],
                 "timeToFirstTokenSec": timing["time_to_first_token"], "promptTokensCount": usage.prompt_tokens,
                 "predictedTokensCount": usage.completion_tokens, "totalTokensCount": num_tokens}
        config = {"fields": [{"key": key, "value": value} for key, value in fields.items()]}
        await self.send({"type": "success", "stats": stats, "modelInfo": model_info, "loadModelConfig": load_config,
                         "predictionConfig": config})

    async def _delta(self, delta) -> None:
        """A Delta's fragments: thinking between <think> / </think> tag fragments, then the answer text; tool calls
        (chat) once whole."""
        # A fragment counts the tokens generated since the last one (the tags' tokens go with the text after them).
        self.num_pending += max(delta.num_tokens - self.num_sent, 0)
        self.num_sent = max(self.num_sent, delta.num_tokens)
        if self.shaper is not None:
            reasoning, content, calls, finish = self.shaper.split(delta, whole=True)
        else:
            reasoning, content, calls, finish = delta.reasoning, delta.content, None, delta.finish_reason
        if finish:
            self.finish, self.matched = finish, delta.stop_reason
        if reasoning:
            if not self.in_reasoning:
                self.in_reasoning = True
                await self.send(fragment("<think>", 0, "reasoningStartTag"))
            await self.send(fragment(reasoning, self._take_pending(), "reasoning"))
        if self.in_reasoning and (content or calls or finish):
            self.in_reasoning = False
            await self.send(fragment("</think>", 0, "reasoningEndTag"))
        if content:
            await self.send(fragment(content, self._take_pending()))
        for call in calls or []:
            await self._tool_call(call)

    def _take_pending(self) -> int:
        num, self.num_pending = self.num_pending, 0
        return num

    async def _tool_call(self, call) -> None:
        """A whole tool call (a tool_stream.CallDelta read whole) as the SDK's toolCallGenerationStart /
        toolCallGenerationEnd pair, its arguments an object as the SDK's ToolCallRequest holds them."""
        try:
            arguments = orjson.loads(call.whole or call.arguments or "{}")
        except orjson.JSONDecodeError:
            arguments = {}
        await self.send({"type": "toolCallGenerationStart"})
        await self.send({"type": "toolCallGenerationEnd", "toolCallRequest": {
            "type": "function", "id": call.id, "name": call.name or "",
            "arguments": arguments if isinstance(arguments, dict) else {}}})
