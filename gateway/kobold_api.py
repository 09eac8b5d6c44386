"""Gateway process: KoboldCpp's native KoboldAI API (koboldcpp.py), what KoboldAI Lite, SillyTavern's KoboldAI
source and other KoboldAI clients connect to: GET /api/v1/model, /api/v1/info/version, /api/extra/version,
/api/v1/config/max_context_length, /api/v1/config/max_length, /api/extra/true_max_context_length; POST /api/v1/generate
and /api/extra/generate/stream (run as the /v1/completions request they ask for), /api/extra/generate/check and
/api/extra/abort.

generate answers {"results": [{"text", "finish_reason", "logprobs": null, "prompt_tokens", "completion_tokens"}]}; the
stream sends `event: message` / `data: {"token": piece, "finish_reason": null}` events, then one with the finish reason
("stop" or "length") and an empty token, as KoboldCpp's handle_sse_stream. Its instruct placeholders ({{[INPUT]}}, ...)
are the chat template's tags (gateway/kobold_placeholders.py). The body's memory is put before the prompt
and trim_stop (KoboldCpp's default true) leaves the stop sequence out, as KoboldCpp reads them; its samplers map onto
llama.cpp's fields (rep_pen -> repeat_penalty over rep_pen_range tokens, typical -> typical_p, nsigma -> top_n_sigma),
so DRY, XTC, mirostat and dynamic temperature run as they run there, its banned_tokens
(banned phrases) are vLLM's bad_words, and the neutral values its clients send on every request (tfs 1, top_a 0,
rep_pen_slope, sampler_order) change nothing.
"""
from __future__ import annotations

import re

from aiohttp import web

from gateway.config import GatewayConfig
from gateway.engine import Delta, Engine, Usage
from gateway.errors import ApiError, InvalidRequest, Unsupported, renamed
from gateway.gen_request import ChoiceResult
from gateway.http_stream import stream_generation
from gateway.kobold_context import fit_context
from gateway.kobold_jobs import KoboldJob, KoboldJobs, busy_as_koboldcpp, genkey_of
from gateway.kobold_placeholders import replace_placeholders, template_tags
from gateway.offload import run_cpu
from gateway.openai_completion import parse_completion
from gateway.openai_shape import SSE_HEADERS
from gateway.stream import SseFramer, sse_event
from gateway import json_out
from gateway.web import json_response, read_json

# KoboldCpp's default output length (its --defaultgenamt) and the KoboldAI API version it reports.
DEFAULT_MAX_LENGTH = 512
KAI_API_VERSION = "1.2.5"
KOBOLDCPP_VERSION = "1.100"
# KoboldAI field -> the llama.cpp / vLLM field of /v1/completions it is.
_RENAMED = {"max_length": "n_predict", "rep_pen": "repeat_penalty", "rep_pen_range": "repeat_last_n",
            "typical": "typical_p", "stop_sequence": "stop", "nsigma": "top_n_sigma", "sampler_seed": "seed"}
# A /v1/completions error names the KoboldAI field the client sent (gateway.errors.renamed); stop and seed, words of
# other messages too, only as the param or quoted.
_RENAMES = [(re.compile(rf"\b{new}\b"), old) for old, new in _RENAMED.items() if new not in ("stop", "seed")] + [
    (re.compile(r"\bbanned_strings\b"), "banned_tokens"), (re.compile("'stop'"), "'stop_sequence'"),
    (re.compile("'seed'"), "'sampler_seed'")]
_PARAM_RENAMES = [(re.compile(r"^stop\b"), "stop_sequence"), (re.compile(r"^seed$"), "sampler_seed")]
# Taken as they are: the same name on /v1/completions.
_KEPT = ("temperature", "top_p", "top_k", "min_p", "presence_penalty", "n", "grammar", "logit_bias",
         "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers",
         "xtc_threshold", "xtc_probability", "dynatemp_range", "dynatemp_exponent", "mirostat", "mirostat_tau",
         "mirostat_eta", "smoothing_factor", "smoothing_curve", "adaptive_target", "adaptive_decay")


def completion_body(body, card) -> dict:
    """The /v1/completions body a KoboldAI generate body asks for (400 for a body that is no object, no prompt, or
    media, which is not served here); KoboldCpp's instruct placeholders replaced by the chat template's tags (CPU
    work: run it off the loop)."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", param=None)
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        raise InvalidRequest("'prompt' must be a string", param="prompt")
    for field in ("images", "audio"):
        if body.get(field):
            raise Unsupported(f"{field}: this model server generates text only", param=field)
    memory = body.get("memory") if isinstance(body.get("memory"), str) else ""
    out = {"n_predict": DEFAULT_MAX_LENGTH, "cache_prompt": True}
    out.update({new: body[old] for old, new in _RENAMED.items() if body.get(old) is not None})
    stops = out.get("stop") if isinstance(out.get("stop"), list) else []
    if body.get("replace_instruct_placeholders") is not False and "{{[" in prompt + memory + "".join(map(str, stops)):
        prompt, memory, out["stop"] = replace_placeholders(prompt, memory, stops, template_tags(card))
    fit_context(out, memory, prompt, body, card)
    out.update({key: body[key] for key in _KEPT if body.get(key) is not None})
    if body.get("banned_tokens"):
        # KoboldCpp's banned phrases: vLLM's bad_words here (the phrase's tokens never completed).
        out["banned_strings"] = body["banned_tokens"]
    if isinstance(out.get("seed"), int) and out["seed"] < 0:
        del out["seed"]
    if body.get("singleline"):
        # KoboldAI's singleline: the output ends at its first line break.
        stops = out.get("stop")
        out["stop"] = [*(stops if isinstance(stops, list) else [stops] if stops else []), "\n"]
    # KoboldCpp's trim_stop (true unless sent false) cuts the output before a stop sequence.
    out["include_stop_str_in_output"] = body.get("trim_stop") is False
    # use_default_badwordsids bans the end token; bypass_eos lets generation run past it.
    out["ignore_eos"] = bool(body.get("use_default_badwordsids") or body.get("bypass_eos"))
    out["skip_special_tokens"] = not body.get("render_special")
    return out


async def _object(request: web.Request) -> dict:
    """The body, which must be a JSON object (KoboldCpp reads its genkey from it)."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object", param=None)
    return body


def _text(result) -> str:
    return result.reasoning + result.content


class KoboldFramer(SseFramer):
    """KoboldCpp's stream: an `event: message` per piece ({"token", "finish_reason": null}), then the finish; each
    piece also kept in the job that /api/extra/generate/check reads."""
    content_type = "text/event-stream; charset=utf-8"
    headers = SSE_HEADERS

    def __init__(self, job: KoboldJob):
        self.job = job

    @staticmethod
    def _event(token: str, finish_reason) -> bytes:
        """One event (U+2028 and U+2029 escaped, as json_out.event_dumps writes every SSE event)."""
        return b"event: message\ndata: " + json_out.event_dumps({"token": token, "finish_reason": finish_reason}) + \
            b"\n\n"

    def start(self, usage: Usage) -> list[bytes]:
        """Nothing: the first event carries the first text."""
        return []

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """The piece's text, then (on the choice's last) the finish reason with no text, as KoboldCpp splits it."""
        text = delta.reasoning + delta.content
        self.job.add(delta)
        frames = [self._event(text, None)] if text else []
        if delta.finish_reason:
            frames.append(self._event("", "stop" if delta.finish_reason == "stop" else "length"))
        return frames

    def end(self, usage: Usage) -> list[bytes]:
        """Nothing more: KoboldCpp's stream ends with the finish event."""
        return []

    def error(self, error: ApiError, usage: Usage) -> list[bytes]:
        """The error object as a `data:` event of its own, and no `data: [DONE]`, which KoboldCpp never sends on this
        stream (koboldcpp.py handle_sse_stream: only its OpenAI formats end so): SillyTavern's KoboldAI source
        JSON.parses every event's data, and the [DONE] after a mid-stream error (a drain past its grace, a dead
        worker) failed the whole generation; Lite and other readers of `event: message` skip an event without one."""
        return [sse_event(error.to_dict())]


class KoboldRoutes:
    """KoboldCpp's KoboldAI API over the served model."""

    def __init__(self, engine: Engine, config: GatewayConfig):
        self.engine, self.config = engine, config
        self.jobs = KoboldJobs()

    def register(self, app: web.Application) -> None:
        """Adds the routes named in the module docstring."""
        app.router.add_get("/api/v1/model", self.model)
        app.router.add_get("/api/v1/info/version", self.info_version)
        app.router.add_get("/api/extra/version", self.version)
        for path in ("/api/v1/config/max_context_length", "/api/extra/true_max_context_length"):
            app.router.add_get(path, self.max_context_length)
        app.router.add_get("/api/v1/config/max_length", self.max_length)
        app.router.add_post("/api/v1/generate", self.generate)
        app.router.add_post("/api/extra/generate/stream", self.generate_stream)
        app.router.add_post("/api/extra/generate/check", self.check)
        app.router.add_post("/api/extra/abort", self.abort)
        app.router.add_get("/api/extra/perf", self.perf)

    async def model(self, request: web.Request) -> web.Response:
        """{"result": "koboldcpp/<served name>"}, as KoboldCpp names its model."""
        return json_response({"result": f"koboldcpp/{await self.engine.served_name()}"})

    async def info_version(self, request: web.Request) -> web.Response:
        """The KoboldAI API version KoboldCpp reports."""
        return json_response({"result": KAI_API_VERSION})

    async def version(self, request: web.Request) -> web.Response:
        """KoboldCpp's version object: text generation only (no image, speech, vision or embeddings)."""
        return json_response({"result": "KoboldCpp", "version": KOBOLDCPP_VERSION, "protected": False,
                              "txt2img": False, "vision": False, "audio": False, "transcribe": False,
                              "multiplayer": False, "websearch": False, "tts": False, "embeddings": False,
                              "savedata": False, "admin": 0, "guidance": False, "jinja": False})

    async def max_context_length(self, request: web.Request) -> web.Response:
        """{"value": the served context}."""
        return json_response({"value": (await self.engine.card()).max_context_len})

    async def max_length(self, request: web.Request) -> web.Response:
        """{"value": the output length a generate without max_length gets}."""
        return json_response({"value": DEFAULT_MAX_LENGTH})

    async def perf(self, request: web.Request) -> web.Response:
        """KoboldCpp's status: the scheduler's queue and whether it is idle, the last KoboldAI generation's figures
        (KoboldJobs.perf); 503 while the scheduler does not answer."""
        load = await self.engine.check_loaded()
        return json_response(self.jobs.perf(load.num_running, load.num_waiting))

    async def check(self, request: web.Request) -> web.Response:
        """The text so far of the generation sent with the body's genkey (KoboldAI Lite's polled streaming), empty
        when none runs, as KoboldCpp and TabbyAPI answer."""
        body = await _object(request)
        return json_response({"results": [{"text": self.jobs.pending_text(genkey_of(body))}]})

    async def abort(self, request: web.Request) -> web.Response:
        """Ends the generations sent with the body's genkey (without one: those sent without one), each answering the
        text it had: {"success": "true", "done": "true"}, or KoboldCpp's {"success": "false", "done": "false"} when
        none runs. Any body is taken, as KoboldCpp reads its genkey only from a body that parses (SillyTavern posts
        none when its client leaves). It answered "false" and ended nothing, so Lite's Abort left the generation
        running to its max_length."""
        try:
            body = await read_json(request) if request.body_exists else {}
        except ApiError:
            body = {}
        done = "true" if self.jobs.abort(genkey_of(body)) else "false"
        return json_response({"success": done, "done": done})

    async def _start(self, request: web.Request, stream: bool = False):
        body = await read_json(request)
        card = await self.engine.card()
        translated = await run_cpu(completion_body, body, card)
        if stream and isinstance(translated.get("n"), int) and translated["n"] > 1:
            # The stream's events carry no choice index: the choices' tokens would interleave in one text.
            raise InvalidRequest("n: KoboldCpp's stream carries one generation; ask for more with /api/v1/generate",
                                 param="n")
        try:
            plan = await run_cpu(parse_completion, translated, card, await self.engine.served_name(),
                                 cap_output=True, read_thinking=False)
        except ApiError as exc:
            raise renamed(exc, _RENAMES, _PARAM_RENAMES) from None
        return await self.engine.start(plan.gen), genkey_of(body)

    @busy_as_koboldcpp
    async def generate(self, request: web.Request) -> web.Response:
        """POST /api/v1/generate: the whole output of each choice (the first one's so far for
        /api/extra/generate/check)."""
        gen, genkey = await self._start(request)
        results = [ChoiceResult(i) for i in range(gen.req.num_choices)]

        def absorb(delta: Delta) -> None:
            results[delta.index].absorb(delta)
            if delta.index == 0:
                job.add(delta)
        with self.jobs.track(genkey, gen) as job:
            await gen.drain(absorb)
        usage = gen.usage()
        return json_response({"results": [
            {"text": _text(result), "finish_reason": "stop" if result.finish_reason == "stop" else "length",
             "logprobs": None, "prompt_tokens": usage.prompt_tokens, "completion_tokens": len(result.token_ids)}
            for result in results]})

    @busy_as_koboldcpp
    async def generate_stream(self, request: web.Request) -> web.StreamResponse:
        """POST /api/extra/generate/stream: KoboldCpp's SSE stream of the output (one generation: n > 1 is a 400)."""
        gen, genkey = await self._start(request, stream=True)
        with self.jobs.track(genkey, gen) as job:
            return await stream_generation(request, gen, KoboldFramer(job), self.config.sse_keepalive_s)
