"""The asyncio side of the engine: submit requests, receive their outputs on the event loop.

The engine calls `on_output` from its own thread; we only hop the output onto the loop there
(`call_soon_threadsafe`), so HTTP never blocks the engine and the engine never blocks on HTTP.
A `RequestGroup` that is closed before all its requests finished aborts the rest, which is how a
client disconnect (the handler task is cancelled, or the stream stops) frees KV pages.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from dgjax.runtime.engine import QueueFullError
from dgjax.runtime.types import GenerationRequest, RequestOutput
from dgjax.serving.errors import APIError, bad_request
from dgjax.serving.metrics import RequestTimer, ServingMetrics


class RequestGroup:
    """The engine requests behind one HTTP request (n choices x prompts); outputs in arrival order."""

    def __init__(self, client: "AsyncEngineClient", request_ids: list[str]) -> None:
        self._client = client
        self.request_ids = request_ids
        self._queue: asyncio.Queue[tuple[int, RequestOutput]] = asyncio.Queue()
        self._submitted: list[int] = []
        self._finished: set[int] = set()
        self._timers = [RequestTimer(client.metrics) for _ in request_ids]

    def _callback(self, index: int):
        loop = asyncio.get_running_loop()

        def on_output(out: RequestOutput) -> None:  # engine thread: never block here
            try:
                loop.call_soon_threadsafe(self._arrived, index, out)
            except RuntimeError:  # the loop is closed: the server is gone, nobody listens
                pass

        return on_output

    def _arrived(self, index: int, out: RequestOutput) -> None:
        """On the loop. Metrics are taken here, not by the reader, so that requests whose reader
        is gone (client disconnected) still count, e.g. as finished_reason="abort"."""
        self._timers[index].observe(out)
        self._queue.put_nowait((index, out))

    async def __aiter__(self) -> AsyncIterator[tuple[int, RequestOutput]]:
        while len(self._finished) < len(self._submitted):
            index, out = await self._queue.get()
            if out.finished:
                self._finished.add(index)
            yield index, out

    def abort_unfinished(self) -> None:
        for i in self._submitted:
            if i not in self._finished:
                self._client.engine.abort(self.request_ids[i])


class AsyncEngineClient:
    def __init__(self, engine, metrics: ServingMetrics) -> None:
        self.engine = engine
        self.metrics = metrics
        self.shutting_down = False

    def submit(self, requests: list[GenerationRequest], prompt_params: list[str]) -> RequestGroup:
        """Submit all or none: if one is refused, the ones already queued are aborted."""
        if self.shutting_down:
            raise APIError(503, "The server is shutting down.", code="shutting_down")
        group = RequestGroup(self, [r.request_id for r in requests])
        for i, req in enumerate(requests):
            arrival = time.monotonic()
            try:
                self.engine.submit(req, group._callback(i))
            except QueueFullError as e:
                group.abort_unfinished()
                raise APIError(503, f"The server is overloaded, retry later ({e}).",
                               code="overloaded") from None
            except ValueError as e:
                group.abort_unfinished()
                raise bad_request(str(e), prompt_params[i], "invalid_prompt") from None
            except RuntimeError as e:  # the engine loop is not running
                group.abort_unfinished()
                raise APIError(503, f"The engine is unavailable: {e}", code="engine_unavailable") from None
            group._timers[i].start(arrival, len(req.prompt_token_ids))
            group._submitted.append(i)
        return group
