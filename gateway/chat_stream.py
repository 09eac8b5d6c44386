"""Gateway process: a streamed chat answer as OpenAI's SSE chunks (role chunk, deltas, finish, usage, [DONE]); the
chunk and message bodies are gateway/openai_shape.ChatShaper's."""
from __future__ import annotations

from typing import Optional

from gateway.engine import Delta, Usage
from gateway.llama_cpp_timings import chunk_extras, oai_timings
from gateway.openai_shape import SSE_HEADERS, ChatShaper
from gateway.openai_usage import chat_usage, choice_usage
from gateway.sglang_fields import cached_tokens_sglext
from gateway.stream import SSE_DONE, SseFramer


class ChatFramer(SseFramer):
    """SSE framing of a chat stream (role chunk, deltas, finish chunk, usage chunk, [DONE])."""
    content_type = "text/event-stream; charset=utf-8"
    headers = SSE_HEADERS

    def __init__(self, shaper: ChatShaper):
        self.s = shaper
        self.p = shaper.plan
        self._ids: dict = {}   # return_token_ids: per choice, generated ids not yet sent on a chunk
        self._num_reasoning: dict = {}   # per choice, its thinking tokens so far (usage's reasoning_tokens)
        self._held: dict = {}        # hold_reasoning: per choice, the reasoning not sent yet

    def _chunk(self, choices: list, usage: Usage, prompt_token_ids: Optional[list] = None,
               num_tokens: int = 0, prompt_text: Optional[str] = None) -> bytes:
        """One choice's chunk; num_tokens: what that choice generated up to it (its continuous usage). A finish chunk
        is the stream's last but for [DONE] unless a usage chunk follows: llama.cpp's timings ride on it then, and on
        each chunk of text or calls with timings_per_token (server-task.cpp: the partial's last delta has them)."""
        if self.p.return_token_ids:
            for choice in choices:
                choice["token_ids"] = self._ids.pop(choice["index"], [])
        llama = chunk_extras(self.s, choices[0], usage, num_tokens, self.p.include_usage)
        if self.p.continuous_usage and self.p.include_usage:
            index = choices[0]["index"]
            own = chat_usage(self.p, choice_usage(usage, 0, num_tokens), [self._num_reasoning.get(index, 0)])
            return self.s.chunk(choices, own, True, prompt_token_ids, prompt_text, llama=llama)
        return self.s.chunk(choices, None, self.p.include_usage, prompt_token_ids, prompt_text, llama=llama)

    def usage_body(self, usage: Usage) -> dict:
        """The `usage` object of a chat chunk (reasoning tokens in completion_tokens_details)."""
        return chat_usage(self.p, usage, self._num_reasoning.values())

    def start(self, usage: Usage) -> list[bytes]:
        """Each choice's role chunk (role assistant, vLLM's echo text), with the prompt ids / text where asked."""
        # With continuous_usage_stats every chunk carries usage, the role chunks too (prompt tokens, 0 generated).
        # return_token_ids: each choice's role chunk names the prompt, as vLLM's first chunk does; return_prompt_text:
        # the first chunk has the rendered prompt, as vLLM sends it.
        prompt = self.p.gen.prompt_ids if self.p.return_token_ids else None
        text = getattr(self.p, "prompt_text", None)
        echo = getattr(self.p, "echo_prefix", "")   # vLLM's echo: the final assistant message's text comes first
        return [self._chunk([{"index": i, "delta": {"role": "assistant", "content": echo}, "logprobs": None,
                              "finish_reason": None}], usage, prompt, prompt_text=None if i else text)
                for i in range(self.p.gen.num_choices)]

    def delta(self, delta: Delta, usage: Usage) -> list[bytes]:
        """The chunks of one Delta: reasoning (its own chunk where held back), content, tool-call deltas, logprobs and
        ids, then the finish."""
        reasoning, content, calls, finish = self.s.split(delta)
        self._num_reasoning[delta.index] = delta.num_reasoning_tokens
        frames = []
        if getattr(self.p, "hold_reasoning", False):
            reasoning = self._release(delta.index, reasoning, bool(content or calls or finish))
            if reasoning and (content or calls):
                # Its own chunk, as SGLang sends it: clients that read a delta's reasoning or else its content.
                frames.append(self._chunk([{"index": delta.index, "delta": {"reasoning_content": reasoning,
                                           "reasoning": reasoning}, "logprobs": None, "finish_reason": None}],
                                          usage, num_tokens=delta.num_tokens))
                reasoning = ""
        if self.p.return_token_ids:
            # The ids ride on this choice's next chunk (held text, such as a tool call forming, sends none).
            self._ids[delta.index] = self._ids.get(delta.index, []) + delta.token_ids
        body = {}
        if reasoning:
            body.update(reasoning_content=reasoning, reasoning=reasoning)
        if content:
            body["content"] = content
        # Logprobs with no text (the eos that ended the choice) ride on the finish chunk, as in vLLM's last chunk.
        on_finish = bool(finish) and not body and not calls and self.p.gen.num_logprobs is not None
        if body or delta.logprobs and self.p.gen.num_logprobs is not None and not on_finish:
            frames.append(self._chunk([{"index": delta.index, "delta": body,
                                        "logprobs": self.s.logprobs(delta.logprobs), "finish_reason": None}],
                                      usage, num_tokens=delta.num_tokens))
        # One chunk per piece of a call (its name first, as OpenAI streams them); a call's last piece may be empty.
        for call in [call for call in calls or [] if call.arguments or call.id is not None]:
            frames.append(self._chunk([{"index": delta.index, "delta": self.s.call_fields([call]),
                                        "logprobs": None, "finish_reason": None}], usage,
                                      num_tokens=delta.num_tokens))
        if finish:
            logprobs = self.s.logprobs(delta.logprobs) if on_finish and delta.logprobs else None
            frames.append(self._chunk([{"index": delta.index, "delta": {}, "logprobs": logprobs,
                                        "finish_reason": self.s.chat_finish(finish),
                                        "stop_reason": delta.stop_reason}], usage,
                                      num_tokens=delta.num_tokens))
        return frames

    def _release(self, index: int, reasoning: str, ended: bool) -> str:
        """SGLang's stream_reasoning false: a choice's reasoning held until its answer, a call or its finish."""
        held = self._held.pop(index, "") + reasoning
        if not ended:
            self._held[index] = held
            return ""
        return held

    def end(self, usage: Usage) -> list[bytes]:
        """SGLang's cached-tokens chunk when asked, the usage chunk (choices []) with llama.cpp timings when
        include_usage, then [DONE]."""
        frames = ([self.s.chunk([], None, self.p.include_usage, sglext=cached_tokens_sglext(usage))]
                  if self.p.cached_tokens_details else [])
        timings = oai_timings(self.s.timed, usage)
        llama = None if timings is None else {"timings": timings}
        frames += [self.s.chunk([], self.usage_body(usage), True, llama=llama)] if self.p.include_usage else []
        return frames + [SSE_DONE]
