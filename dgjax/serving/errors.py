"""OpenAI-shaped errors: one exception type that every layer raises, one JSON shape clients parse."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from starlette.responses import JSONResponse

_DEFAULT_TYPE = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    500: "server_error",
    503: "service_unavailable_error",
}


class APIError(Exception):
    """A request failure that maps to an HTTP status and OpenAI's `{"error": {...}}` body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type or _DEFAULT_TYPE.get(status, "invalid_request_error")

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)

    def response(self, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def error_body(message: str, type: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def bad_request(message: str, param: str | None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def http_status_error(status: int, detail: str | None = None) -> APIError:
    """Starlette's own errors (unknown route, wrong method) in OpenAI's shape."""
    message = detail or HTTPStatus(status).phrase
    return APIError(status, message, code=HTTPStatus(status).phrase.lower().replace(" ", "_"))
