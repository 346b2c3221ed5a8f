"""POST /v1/chat/completions: template the conversation, run n engine requests, answer or stream."""

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
from dgjax.serving.custom_tool_calls import has_custom_tool_calls, inline_custom_tool_calls
from dgjax.serving.errors import APIError, bad_request
from dgjax.serving.logprobs import TokenRenderer, chat_logprobs
from dgjax.serving.protocol import ChatRequest, check_context, parse_chat_request
from dgjax.serving.reasoning_effort import apply_reasoning_effort
from dgjax.serving.sse import SSE_DONE, EventStreamResponse, sse_event, until_disconnect
from dgjax.serving.structured import chat_grammar
from dgjax.serving.tool_output import RequestParsing, chat_template_text, encode_chat_prompt
from dgjax.structured.tool_formats import detect_format

logger = logging.getLogger("dgjax.serving")


def render_chat_prompt(tokenizer, req: ChatRequest, tool_parser: str | None = None) -> list[int]:
    """Token ids of the templated conversation; template failures are the client's (400).
    `tool_parser` (the server's tool-call format) says how past custom tool calls are written."""
    kwargs = dict(req.template_kwargs)
    if req.continue_final_message:
        kwargs["continue_final_message"] = True
    messages = req.messages
    if has_custom_tool_calls(messages):
        fmt = detect_format(tool_parser, chat_template_text(tokenizer))
        if fmt is None:
            raise bad_request(f"Custom tool calls cannot be written in the {tool_parser!r} "
                              "tool-call format.", "messages", "unsupported")
        messages = inline_custom_tool_calls(messages, fmt)
    try:
        ids = encode_chat_prompt(tokenizer, messages, req.add_generation_prompt, req.tools,
                                 **kwargs)
    except Exception as e:  # ChatTemplateError (raise_exception, sandbox), odd kwargs ...
        raise bad_request(f"The chat template rejected the conversation: {e}", "messages",
                          "chat_template_error") from None
    return list(ids)


async def create_chat_completion(ctx: ServerContext, request: Request,
                                 body: dict[str, Any]) -> Any:
    # off the event loop: attached PDFs take real CPU time to read
    req = await asyncio.to_thread(parse_chat_request, body, ctx.vocab_size, ctx.defaults,
                                  ctx.options.content)
    ctx.check_model(req.common.model)
    headers = apply_reasoning_effort(body, req.template_kwargs, ctx.reasoning,
                                     ctx.options.unsupported_reasoning_effort)
    tool_format = ctx.output_parsing.tool_format
    prompt_ids = await asyncio.to_thread(render_chat_prompt, ctx.tokenizer, req,
                                         tool_format.name if tool_format else None)
    params = req.common.params
    check_context(len(prompt_ids), params.max_tokens, ctx.max_model_len, "messages")
    parsing = ctx.output_parsing.for_request(req, prompt_ids, ctx.tokenizer)  # may edit params
    params.grammar = await chat_grammar(ctx, body, req, parsing)  # response_format, tools
    request_id = new_request_id("chatcmpl")
    n = req.common.n
    group = ctx.client.submit(fan_out(request_id, [prompt_ids], params, n, req.common.cache_salt),
                              ["messages"] * n)
    renderer = TokenRenderer(ctx.tokenizer, req.common.return_tokens_as_token_ids)
    name = ctx.served_model_name
    if req.common.stream:
        return EventStreamResponse(_stream(group, req, renderer, request_id, name,
                                           len(prompt_ids), parsing),
                                   keepalive_s=ctx.options.sse_keepalive_s, headers=headers)
    try:
        results = await until_disconnect(request.receive, collect(ctx, group, n))
    finally:
        group.abort_unfinished()
    return JSONResponse(_full_response(results, req, renderer, request_id, name,
                                       len(prompt_ids), parsing), headers=headers)


def _full_response(results: list[ChoiceResult], req: ChatRequest, r: TokenRenderer,
                   request_id: str, model: str, prompt_len: int,
                   parsing: RequestParsing) -> dict[str, Any]:
    choices = []
    for i, res in enumerate(results):
        logprobs = ({"content": chat_logprobs(res.logprobs, r, req.top_logprobs), "refusal": None}
                    if req.logprobs else None)
        parser = parsing.choice()
        choices.append({"index": i, "message": parser.message("".join(res.text)),
                        "logprobs": logprobs, "finish_reason": parser.finish_reason(
                            res.finish_reason),
                        "stop_reason": res.stop_reason})
    return {"id": request_id, "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": choices,
            "usage": usage(prompt_len, sum(res.num_generated_tokens for res in results),
                           results[0].num_cached_tokens if results else 0)}


async def _stream(group, req: ChatRequest, r: TokenRenderer, request_id: str, model: str,
                  prompt_len: int, parsing: RequestParsing) -> AsyncIterator[bytes]:
    created = int(time.time())
    include_usage = req.common.include_usage

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        obj = {"id": request_id, "object": "chat.completion.chunk", "created": created,
               "model": model, "choices": choices}
        if include_usage:
            obj["usage"] = None
        obj.update(extra)
        return sse_event(obj)

    generated = [0] * req.common.n
    cached = 0
    parsers = [parsing.choice() for _ in range(req.common.n)]
    try:
        for i in range(req.common.n):
            yield chunk([{"index": i, "delta": {"role": "assistant", "content": ""},
                          "logprobs": None, "finish_reason": None}])
        async for i, out in group:
            generated[i] = max(out.num_generated_tokens, generated[i] + len(out.token_ids))
            cached = max(cached, out.num_cached_tokens)
            if out.error:
                yield sse_event(engine_error(out.error, generated[i]).body())
                break
            deltas = parsers[i].deltas(out.text, out.finished)  # text held back gives none
            # text held back and nothing else to say: no empty `delta: {}` chunk (logprobs still go out)
            if not (deltas or out.finished or (req.logprobs and out.token_ids)):
                continue
            deltas = deltas or [{}]
            for k, delta in enumerate(deltas):  # logprobs on the first, the finish on the last
                last = k == len(deltas) - 1
                choice: dict[str, Any] = {
                    "index": i, "delta": delta, "logprobs": None,
                    "finish_reason": parsers[i].finish_reason(finish_reason_str(out)) if last
                    else None}
                if req.logprobs and k == 0:
                    choice["logprobs"] = {"content": chat_logprobs(
                        out.logprobs or [], r, req.top_logprobs), "refusal": None}
                if out.finished and last:
                    choice["stop_reason"] = out.stop_reason
                yield chunk([choice])
        if include_usage:
            yield chunk([], usage=usage(prompt_len, sum(generated), cached))
    except Exception as e:
        logger.exception("chat stream %s failed", request_id)
        yield sse_event(APIError(500, f"Generation failed: {e}", code="engine_error").body())
    finally:
        group.abort_unfinished()
    yield SSE_DONE
