"""POST /v1/completions: text or token-id prompts (one or many), echo, legacy logprobs."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from dgjax.serving.context import (ChoiceResult, ServerContext, collect, engine_error, fan_out,
                                   finish_reason_str, new_request_id, usage)
from dgjax.serving.errors import APIError
from dgjax.serving.logprobs import CompletionLogprobs, TokenRenderer, merge_completion_logprobs
from dgjax.serving.protocol import CompletionRequest, check_context, parse_completion_request
from dgjax.serving.sse import SSE_DONE, EventStreamResponse, sse_event, until_disconnect
from dgjax.serving.structured import completion_grammar

logger = logging.getLogger("dgjax.serving")


def tokenize_prompts(tokenizer, prompts: list[str | list[int]]) -> tuple[list[list[int]], list[str]]:
    """Token ids for the engine and the prompt texts that `echo` returns."""
    ids, texts = [], []
    for p in prompts:
        if isinstance(p, str):
            ids.append(list(tokenizer.encode(p, add_special_tokens=True)))
            texts.append(p)
        else:
            ids.append(p)
            texts.append(tokenizer.decode(p, skip_special_tokens=False))
    return ids, texts


async def create_completion(ctx: ServerContext, request: Request, body: dict[str, Any]) -> Any:
    req = parse_completion_request(body, ctx.vocab_size, ctx.defaults)
    ctx.check_model(req.common.model)
    prompt_ids, prompt_texts = await asyncio.to_thread(tokenize_prompts, ctx.tokenizer,
                                                       req.prompts)
    for ids in prompt_ids:
        check_context(len(ids), req.common.params.max_tokens, ctx.max_model_len, "prompt")
    req.common.params.grammar = await completion_grammar(ctx, body)  # response_format
    request_id = new_request_id("cmpl")
    n = req.common.n
    requests = fan_out(request_id, prompt_ids, req.common.params, n, req.common.cache_salt)
    group = ctx.client.submit(requests, ["prompt"] * len(requests))
    renderer = TokenRenderer(ctx.tokenizer, req.common.return_tokens_as_token_ids)
    job = _Job(req, renderer, request_id, ctx.served_model_name, prompt_ids, prompt_texts)
    if req.common.stream:
        return EventStreamResponse(job.stream(group), keepalive_s=ctx.options.sse_keepalive_s)
    try:
        results = await until_disconnect(request.receive, collect(ctx, group, len(requests)))
    finally:
        group.abort_unfinished()
    return JSONResponse(job.full_response(results))


class _Job:
    """Formatting state for one completions request (choice k belongs to prompt k // n)."""

    def __init__(self, req: CompletionRequest, renderer: TokenRenderer, request_id: str,
                 model: str, prompt_ids: list[list[int]], prompt_texts: list[str]) -> None:
        self.req = req
        self.r = renderer
        self.id = request_id
        self.model = model
        self.prompt_ids = prompt_ids
        self.prompt_texts = prompt_texts
        self.created = int(time.time())
        self.n = req.common.n

    def _prompt_of(self, k: int) -> int:
        return k // self.n

    def _echo_logprobs(self, k: int, lp: CompletionLogprobs, prompt_logprobs) -> dict | None:
        ids = self.prompt_ids[self._prompt_of(k)]
        entries = list(prompt_logprobs) if prompt_logprobs is not None else [None] * len(ids)
        return lp.render(entries, ids)

    def full_response(self, results: list[ChoiceResult]) -> dict[str, Any]:
        choices = []
        for k, res in enumerate(results):
            text = "".join(res.text)
            logprobs = None
            if self.req.logprobs is not None:
                lp = CompletionLogprobs(self.r, self.req.logprobs)
                if self.req.echo:
                    logprobs = self._echo_logprobs(k, lp, res.prompt_logprobs)
                logprobs = merge_completion_logprobs(logprobs, lp.render(res.logprobs))
            if self.req.echo:
                text = self.prompt_texts[self._prompt_of(k)] + text
            choices.append({"index": k, "text": text, "logprobs": logprobs,
                            "finish_reason": res.finish_reason, "stop_reason": res.stop_reason})
        return {"id": self.id, "object": "text_completion", "created": self.created,
                "model": self.model, "choices": choices,
                "usage": usage(sum(len(p) for p in self.prompt_ids),
                               sum(res.num_generated_tokens for res in results),
                               sum(res.num_cached_tokens for k, res in enumerate(results)
                                   if k % self.n == 0))}

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> bytes:
        obj = {"id": self.id, "object": "text_completion", "created": self.created,
               "model": self.model, "choices": choices}
        if self.req.common.include_usage:
            obj["usage"] = None
        obj.update(extra)
        return sse_event(obj)

    async def stream(self, group) -> AsyncIterator[bytes]:
        num = len(group.request_ids)
        started = [False] * num
        generated = [0] * num
        cached = [0] * num
        lps = [CompletionLogprobs(self.r, self.req.logprobs or 0) for _ in range(num)]
        try:
            async for k, out in group:
                if out.error:
                    yield sse_event(engine_error(out.error, generated[k]).body())
                    break
                generated[k] = max(out.num_generated_tokens, generated[k] + len(out.token_ids))
                cached[k] = max(cached[k], out.num_cached_tokens)
                text, logprobs = out.text, None
                echo_now = self.req.echo and not started[k]
                started[k] = True
                if self.req.logprobs is not None:
                    head = self._echo_logprobs(k, lps[k], out.prompt_logprobs) if echo_now else None
                    logprobs = merge_completion_logprobs(head, lps[k].render(out.logprobs or []))
                if echo_now:
                    text = self.prompt_texts[self._prompt_of(k)] + text
                if not (text or out.token_ids or out.finished):
                    continue
                choice = {"index": k, "text": text, "logprobs": logprobs,
                          "finish_reason": finish_reason_str(out)}
                if out.finished:
                    choice["stop_reason"] = out.stop_reason
                yield self._chunk([choice])
            if self.req.common.include_usage:
                yield self._chunk([], usage=usage(
                    sum(len(p) for p in self.prompt_ids), sum(generated),
                    sum(c for k, c in enumerate(cached) if k % self.n == 0)))
        except Exception as e:
            logger.exception("completion stream %s failed", self.id)
            yield sse_event(APIError(500, f"Generation failed: {e}", code="engine_error").body())
        finally:
            group.abort_unfinished()
        yield SSE_DONE
