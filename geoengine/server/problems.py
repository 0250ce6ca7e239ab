"""One JSON error body for every error of every endpoint: RFC 9457 problem details.

    {"type": "about:blank", "title": "Invalid request", "status": 400,
     "detail": "locations[1].lat: ...", "errors": [{"field": "locations[1].lat", "message": "..."}]}

Served as `application/problem+json`. Never a traceback.
"""

from __future__ import annotations

import logging

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from geoengine.errors import FieldError, GeoengineError, field_path
from geoengine.server import endpoints
from geoengine.server.framing import PROBLEM_JSON, dumps, problem_bytes
from geoengine.validation import error_message

log = logging.getLogger("geoengine.server")

def problem_response(status: int, detail: str, title: str | None = None, errors=None, headers=None) -> Response:
    return Response(problem_bytes(status, detail, title, errors), status_code=status, headers=headers,
                    media_type=PROBLEM_JSON)


def request_field_path(loc) -> str:
    """('body', 'locations', 1, 'lat') -> 'locations[1].lat' (the request part dropped)."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return field_path(parts)


def _validation_message(err: dict) -> str:
    if err.get("type", "") == "json_invalid":
        ctx = err.get("ctx", {}) or {}
        return f"malformed JSON: {ctx.get('error', err.get('msg', 'invalid value'))}"
    return error_message(err)


_NOT_OBJECT = ("model_attributes_type", "dict_type", "model_type")


def validation_errors(exc: RequestValidationError) -> tuple[str, list[dict]]:
    errors: list[dict] = []
    detail = None
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        kind = err.get("type", "")
        whole = (_validation_message(err) if kind == "json_invalid" else None if loc != ("body",)
                 else "a JSON request body is required" if kind == "missing"
                 else "the request body must be a JSON object" if kind in _NOT_OBJECT else None)
        if whole is not None:  # the body as a whole: its message is the detail
            detail = whole
        errors.append(FieldError("" if whole else request_field_path(loc), whole or _validation_message(err)).as_dict())
    if detail is None:
        detail = "; ".join(f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors)
    return detail, errors


def install(app) -> None:
    """Map every error to the problem body."""

    @app.exception_handler(GeoengineError)
    async def _domain(request: Request, exc: GeoengineError):
        return Response(dumps(exc.to_problem()), status_code=exc.status, headers=exc.headers or None,
                        media_type=PROBLEM_JSON)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        detail, errors = validation_errors(exc)
        return problem_response(400, detail, "Invalid request", errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        status = exc.status_code
        if status == 404:
            detail = f"no endpoint at {request.url.path}" if exc.detail == "Not Found" else str(exc.detail)
        elif status == 405:
            allow = endpoints.methods(request.url.path) or (exc.headers or {}).get("Allow") or (exc.headers or {}).get("allow", "")
            exc.headers = {**(exc.headers or {}), "Allow": allow} if allow else exc.headers
            detail = f"method {request.method} is not allowed on {request.url.path}" + (f"; allowed: {allow}" if allow else "")
        else:
            detail = str(exc.detail)
        return problem_response(status, detail, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.error("internal error on %s %s: %s", request.method, request.url.path, type(exc).__name__, exc_info=exc)
        return problem_response(500, "internal error; the server log has the details", "Internal error")
