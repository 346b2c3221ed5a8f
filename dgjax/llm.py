"""Offline API for notebooks and scripts: the same engine the server runs, called synchronously.

    from dgjax import LLM, SamplingParams
    llm = LLM()                                   # the default model in checkpoints/
    llm.generate(["Once upon a time"], SamplingParams(max_tokens=32))
    llm.chat([{"role": "user", "content": "Hi"}])
"""

from __future__ import annotations

import dataclasses
import itertools
import threading

from dgjax.config import EngineConfig
from dgjax.paths import default_model_dir
from dgjax.runtime.engine import Engine
from dgjax.runtime.types import (
    FinishReason, GenerationRequest, RequestOutput, SamplingParams, TokenLogprob,
)


@dataclasses.dataclass
class Completion:
    prompt_token_ids: list[int]
    text: str
    token_ids: list[int]
    finish_reason: FinishReason
    logprobs: list[TokenLogprob] | None = None
    prompt_logprobs: list[TokenLogprob | None] | None = None
    num_cached_tokens: int = 0


class _Collector:
    """Accumulates one request's deltas; `done` is set on the final output."""

    def __init__(self, prompt: list[int]):
        self.prompt = prompt
        self.text: list[str] = []
        self.ids: list[int] = []
        self.logprobs: list[TokenLogprob] | None = None
        self.prompt_logprobs = None
        self.finish_reason = None
        self.cached = 0
        self.error: str | None = None
        self.done = threading.Event()

    def __call__(self, out: RequestOutput) -> None:
        self.text.append(out.text)
        self.ids.extend(out.token_ids)
        if out.logprobs is not None:
            self.logprobs = (self.logprobs or []) + out.logprobs
        if out.prompt_logprobs is not None:
            self.prompt_logprobs = out.prompt_logprobs
        self.cached = max(self.cached, out.num_cached_tokens)
        if out.finished:
            self.finish_reason, self.error = out.finish_reason, out.error
            self.done.set()

    def result(self) -> Completion:
        self.done.wait()
        if self.error:
            raise RuntimeError(self.error)
        return Completion(self.prompt, "".join(self.text), self.ids, self.finish_reason,
                          self.logprobs, self.prompt_logprobs, self.cached)


class LLM:
    def __init__(self, model: str | None = None, config: EngineConfig | None = None, **config_kwargs):
        if config is None:
            config = EngineConfig(**config_kwargs)
        elif config_kwargs:
            config = dataclasses.replace(config, **config_kwargs)
        self.engine = Engine(model or default_model_dir(), config)
        self.engine.start()
        self.tokenizer = self.engine.tokenizer
        self._ids = itertools.count()

    def generate(self, prompts: str | list[int] | list[str | list[int]],
                 params: SamplingParams | None = None) -> list[Completion]:
        """Generate for each prompt (text or token ids); all run concurrently in the engine."""
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        params = params or SamplingParams()
        collectors = []
        for p in prompts:
            ids = self.tokenizer.encode(p) if isinstance(p, str) else list(p)
            c = _Collector(ids)
            req = GenerationRequest(f"offline-{next(self._ids)}", ids, dataclasses.replace(params))
            self.engine.submit(req, c)
            collectors.append(c)
        return [c.result() for c in collectors]

    def chat(self, messages: list[dict], params: SamplingParams | None = None,
             **template_kwargs) -> Completion:
        """Render `messages` with the model's chat template and generate the assistant's reply."""
        ids = self.tokenizer.encode_chat(messages, add_generation_prompt=True, **template_kwargs)
        return self.generate([ids], params)[0]

    def close(self) -> None:
        self.engine.shutdown()

    def __enter__(self) -> "LLM":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
