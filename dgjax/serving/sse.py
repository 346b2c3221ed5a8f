"""Server-sent events, keep-alive comments, and noticing that the client went away.

Starlette only reports a disconnect to code that listens for it, so both paths race the work against
`receive()` returning `http.disconnect`; the loser is cancelled, and cancellation is what aborts the
engine requests (their `finally` blocks call `engine.abort`).

A stream that has nothing to say for a while (queued behind other requests, a long prefill, a
parser holding back a tool call) sends `: keep-alive` comment lines, which SSE clients ignore but
which keep proxies and client read timeouts from cutting the connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

logger = logging.getLogger("dgjax.serving")

SSE_DONE = b"data: [DONE]\n\n"
SSE_KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx: do not buffer the stream
]

T = TypeVar("T")


def sse_event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


async def wait_for_disconnect(receive: Callable[[], Awaitable[dict]]) -> None:
    """Returns once the client closed the connection (the request body is already consumed)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return


class ClientDisconnected(Exception):
    """The client closed the connection before the response was ready."""


async def until_disconnect(receive: Callable[[], Awaitable[dict]], work: Awaitable[T]) -> T:
    """Run `work`; if the client disconnects first, cancel it and raise ClientDisconnected."""
    work_task = asyncio.ensure_future(work)
    watch_task = asyncio.ensure_future(wait_for_disconnect(receive))
    try:
        await asyncio.wait({work_task, watch_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not work_task.done():
            work_task.cancel()
            await asyncio.gather(work_task, return_exceptions=True)
        watch_task.cancel()
        await asyncio.gather(watch_task, return_exceptions=True)
    if work_task.cancelled():
        raise ClientDisconnected()
    return work_task.result()


class EventStreamResponse:
    """An ASGI response that streams SSE bytes and stops the producer when the client leaves."""

    def __init__(self, events: AsyncIterator[bytes], *, keepalive_s: float = 0.0,
                 headers: dict[str, str] | None = None) -> None:
        self.events = events
        self.keepalive_s = keepalive_s
        self.headers = SSE_HEADERS + [(k.lower().encode("latin-1"), v.encode("latin-1"))
                                      for k, v in (headers or {}).items()]

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})

        async def pump() -> None:
            # keep-alives come from a side task, so the per-token path stays one plain send; the
            # lock keeps the two from interleaving (an uncontended acquire does not suspend)
            lock = asyncio.Lock()
            last_sent = time.monotonic()

            async def send_body(body: bytes, more_body: bool = True) -> None:
                nonlocal last_sent
                async with lock:
                    await send({"type": "http.response.body", "body": body, "more_body": more_body})
                last_sent = time.monotonic()

            async def keep_alive() -> None:
                while True:
                    await asyncio.sleep(last_sent + self.keepalive_s - time.monotonic())
                    if time.monotonic() - last_sent >= self.keepalive_s:
                        await send_body(SSE_KEEPALIVE)

            ticker = asyncio.ensure_future(keep_alive()) if self.keepalive_s > 0 else None
            try:
                async for chunk in self.events:
                    await send_body(chunk)
            finally:
                if ticker is not None:
                    ticker.cancel()
                    await asyncio.gather(ticker, return_exceptions=True)
            await send_body(b"", more_body=False)

        try:
            await until_disconnect(receive, pump())
        except ClientDisconnected:
            logger.info("client disconnected from a stream; its requests were aborted")
        except OSError:
            logger.info("client connection broke while streaming")
        finally:
            await self.events.aclose()
