"""The Starlette app: routes, auth, body limits, error shapes, and the engine's lifetime."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from dgjax.serving.chat import create_chat_completion
from dgjax.serving.completions import create_completion
from dgjax.serving.context import ServerContext
from dgjax.serving.engine_client import AsyncEngineClient
from dgjax.serving.errors import APIError, http_status_error
from dgjax.serving.metrics import CONTENT_TYPE, ServingMetrics
from dgjax.serving.options import ServingOptions, context_fields
from dgjax.serving.protocol import ModelDefaults, parse_json_object

logger = logging.getLogger("dgjax.serving")

DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024

Handler = Callable[[ServerContext, Request, dict[str, Any]], Awaitable[Any]]


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing (413) before reading when Content-Length is over the limit and
    while reading when the bytes actually received are (chunked or lying clients)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise APIError(400, "Invalid Content-Length header.", code="invalid_header") from None
        if size > limit:
            raise _too_large(size, limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(size: int, limit: int) -> APIError:
    return APIError(413, f"Request body of {size}+ bytes exceeds the limit of {limit} bytes.",
                    code="request_too_large")


class DgjaxServer:
    """Holds the app's state; the routes are its methods."""

    def __init__(self, engine, *, served_model_name: str, model_dir: str,
                 api_key: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 options: ServingOptions | None = None) -> None:
        self.engine = engine
        self._engine_stopped = False
        self._shutdown_lock = threading.Lock()
        self.api_key = api_key
        self.max_body_bytes = max_body_bytes
        self.metrics = ServingMetrics(engine, served_model_name)
        self.client = AsyncEngineClient(engine, self.metrics)
        mc = engine.model_config
        self.ctx = ServerContext(
            engine=engine, client=self.client, metrics=self.metrics, tokenizer=engine.tokenizer,
            served_model_name=served_model_name, model_dir=model_dir,
            max_model_len=engine.max_model_len, vocab_size=mc.vocab_size,
            defaults=ModelDefaults(temperature=mc.default_temperature, top_p=mc.default_top_p,
                                   top_k=mc.default_top_k,
                                   repetition_penalty=mc.default_repetition_penalty),
            **context_fields(engine.tokenizer, options or ServingOptions()))

    def begin_shutdown(self) -> None:
        """From now on, new generation requests and /health get 503."""
        self.client.shutting_down = True

    def _check_auth(self, request: Request) -> None:
        if self.api_key is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(),
                                                                 self.api_key.encode()):
            raise APIError(401, "Invalid or missing API key (send 'Authorization: Bearer KEY').",
                           code="invalid_api_key")

    def _v1(self, handler: Callable[[Request], Awaitable[Any]]):
        async def endpoint(request: Request) -> Any:
            self._check_auth(request)
            return await handler(request)
        return endpoint

    def _generation(self, handler: Handler):
        async def endpoint(request: Request) -> Any:
            if self.client.shutting_down:
                raise APIError(503, "The server is shutting down.", code="shutting_down")
            body = parse_json_object(await read_body(request, self.max_body_bytes))
            return await handler(self.ctx, request, body)
        return self._v1(endpoint)

    async def models(self, request: Request) -> JSONResponse:
        ctx = self.ctx
        card = {"id": ctx.served_model_name, "object": "model", "created": ctx.created,
                "owned_by": "dgjax", "root": ctx.model_dir, "parent": None,
                "max_model_len": ctx.max_model_len, "capabilities": ctx.capabilities}
        return JSONResponse({"object": "list", "data": [card]})

    async def health(self, request: Request) -> Response:
        if self.client.shutting_down:
            raise APIError(503, "The server is shutting down.", code="shutting_down")
        if not self.engine.is_healthy():
            raise APIError(503, "The engine loop is not running.", code="engine_dead")
        return JSONResponse({"status": "ok"})

    async def metrics_endpoint(self, request: Request) -> Response:
        return Response(self.metrics.render(), media_type=CONTENT_TYPE)

    def shutdown_engine(self) -> None:
        """Abort what is left and stop the engine (once, however many callers)."""
        self.begin_shutdown()
        with self._shutdown_lock:
            if not self._engine_stopped:
                self._engine_stopped = True
                self.engine.shutdown()

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette):
        yield
        await asyncio.to_thread(self.shutdown_engine)

    def build(self) -> Starlette:
        routes = [
            Route("/v1/chat/completions", self._generation(create_chat_completion),
                  methods=["POST"]),
            Route("/v1/completions", self._generation(create_completion), methods=["POST"]),
            Route("/v1/models", self._v1(self.models), methods=["GET"]),
            Route("/v1/metrics", self._v1(self.metrics_endpoint), methods=["GET"]),
            Route("/metrics", self.metrics_endpoint, methods=["GET"]),
            Route("/health", self.health, methods=["GET"]),
        ]
        app = Starlette(routes=routes, lifespan=self.lifespan,
                        exception_handlers={APIError: _api_error, HTTPException: _http_error,
                                            ClientDisconnect: _client_gone,
                                            Exception: _internal_error})
        app.state.server = self
        return app


async def _api_error(request: Request, exc: APIError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
    return exc.response(headers)


async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return http_status_error(exc.status_code, exc.detail).response(exc.headers)


async def _client_gone(request: Request, exc: ClientDisconnect) -> Response:
    """The client left while sending its body: nothing was submitted, nobody reads the answer."""
    return Response(status_code=400)


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return APIError(500, f"Internal server error: {type(exc).__name__}: {exc}",
                    code="internal_error").response()


def build_app(engine, *, served_model_name: str, model_dir: str, api_key: str | None = None,
              max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
              options: ServingOptions | None = None) -> Starlette:
    """An app serving a started engine; the app's lifespan end shuts the engine down."""
    return DgjaxServer(engine, served_model_name=served_model_name, model_dir=model_dir,
                       api_key=api_key, max_body_bytes=max_body_bytes, options=options).build()
