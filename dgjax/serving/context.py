"""What every endpoint needs to know about the served model, gathered once at startup."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid

from dgjax.runtime.types import GenerationRequest, RequestOutput, SamplingParams
from dgjax.serving.engine_client import AsyncEngineClient
from dgjax.serving.errors import APIError
from dgjax.serving.metrics import ServingMetrics
from dgjax.serving.options import ServingOptions
from dgjax.serving.protocol import ModelDefaults
from dgjax.serving.reasoning_effort import ReasoningControls
from dgjax.serving.tool_output import OutputParsing


@dataclasses.dataclass
class ServerContext:
    engine: object
    client: AsyncEngineClient
    metrics: ServingMetrics
    tokenizer: object
    served_model_name: str
    model_dir: str
    max_model_len: int
    vocab_size: int
    defaults: ModelDefaults
    created: int = dataclasses.field(default_factory=lambda: int(time.time()))
    options: ServingOptions = ServingOptions()
    reasoning: ReasoningControls = ReasoningControls()  # what the chat template can switch
    capabilities: dict = dataclasses.field(default_factory=dict)  # for /v1/models
    output_parsing: OutputParsing = OutputParsing()  # tool-call and reasoning parsers

    @property
    def accepted_model_names(self) -> set[str]:
        d = self.model_dir.rstrip("/")
        return {self.served_model_name, d, os.path.basename(d), os.path.abspath(d)}

    def check_model(self, model: str | None) -> None:
        """A missing `model` means the one we serve (vLLM); a different one is a 404."""
        if model is not None and model not in self.accepted_model_names:
            raise APIError(404, f"The model '{model}' does not exist; this server serves "
                           f"'{self.served_model_name}'.", param="model", code="model_not_found")


def new_request_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def fan_out(base_id: str, prompts: list[list[int]], params: SamplingParams,
            n: int, cache_salt: str | None = None) -> list[GenerationRequest]:
    """n engine requests per prompt, choice k = p*n + j; with a seed, choice j uses seed + j."""
    out = []
    for p, ids in enumerate(prompts):
        for j in range(n):
            sp = dataclasses.replace(params, stop=list(params.stop),
                                     stop_token_ids=list(params.stop_token_ids),
                                     logit_bias=dict(params.logit_bias))
            if params.seed is not None:
                sp.seed = params.seed + j
            out.append(GenerationRequest(f"{base_id}-{p * n + j}", list(ids), sp, cache_salt))
    return out


@dataclasses.dataclass
class ChoiceResult:
    """One engine request's outputs, accumulated."""

    text: list[str] = dataclasses.field(default_factory=list)
    token_ids: list[int] = dataclasses.field(default_factory=list)
    logprobs: list = dataclasses.field(default_factory=list)
    prompt_logprobs: list | None = None
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    num_cached_tokens: int = 0
    num_generated_tokens: int = 0
    error: str | None = None

    def add(self, out: RequestOutput) -> None:
        self.text.append(out.text)
        self.token_ids.extend(out.token_ids)
        if out.logprobs:
            self.logprobs.extend(out.logprobs)
        if out.prompt_logprobs is not None:
            self.prompt_logprobs = out.prompt_logprobs
        self.num_cached_tokens = max(self.num_cached_tokens, out.num_cached_tokens)
        self.num_generated_tokens = max(out.num_generated_tokens, len(self.token_ids))
        if out.finished:
            self.finish_reason = finish_reason_str(out)
            self.stop_reason = out.stop_reason
            self.error = out.error


def finish_reason_str(out: RequestOutput) -> str | None:
    if not out.finished:
        return None
    return out.finish_reason.value if out.finish_reason is not None else "stop"


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens}}


async def collect(ctx: ServerContext, group, num: int) -> list[ChoiceResult]:
    """Run a request group to completion (non-streaming). Engine errors become a 500."""
    results = [ChoiceResult() for _ in range(num)]
    try:
        async for i, out in group:
            results[i].add(out)
    finally:
        group.abort_unfinished()
    for r in results:
        if r.error:
            raise engine_error(r.error, r.num_generated_tokens)
        if r.finish_reason == "abort" and ctx.client.shutting_down:
            raise APIError(503, "The server is shutting down.", code="shutting_down")
    return results


def engine_error(message: str, num_generated: int) -> APIError:
    """An engine-side failure (the step loop crashed): a 500. Overload is refused in `submit`."""
    return APIError(500, f"Generation failed after {num_generated} tokens: {message}",
                    code="engine_error")
