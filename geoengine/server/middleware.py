"""Pure-ASGI middleware: the API-key gateway (credentials, quotas) and the request body limit."""

from __future__ import annotations

import hmac

import anyio
from starlette.exceptions import HTTPException as StarletteHTTPException

from geoengine.errors import GeoengineError, QuotaExceeded
from geoengine.gateway import KeyStore, auth_failure_status
from geoengine.server.problems import PROBLEM_JSON, problem_bytes

# Documentation routes a browser opens without gateway headers.
OPEN_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})


async def send_problem(send, status: int, detail: str, title: str | None = None, headers: dict | None = None):
    body = problem_bytes(status, detail, title)
    raw = [(b"content-type", PROBLEM_JSON.encode()), (b"content-length", str(len(body)).encode())]
    for k, v in (headers or {}).items():
        raw.append((k.lower().encode(), str(v).encode()))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class GatewayMiddleware:
    """Checks X-Gateway-Key and X-Gateway-Host on every request, then counts it against the key's plan.

    A missing or wrong credential is 401 on /matrix and /v1/routing/directions and 403 elsewhere
    (the spec's two listings). A used-up pool is 429 with Retry-After. The key is never logged.
    """

    def __init__(self, app, keystore: KeyStore, gateway_host: str):
        self.app = app
        self.keystore = keystore
        self.host = gateway_host.strip().lower().encode()  # host names compare case-insensitively

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        if path in OPEN_PATHS or scope.get("state", {}).get("web_principal"):
            # web_principal: a page session or publishable key already checked and counted (server/web/)
            return await self.app(scope, receive, send)
        key = host = None
        for name, value in scope["headers"]:
            if name == b"x-gateway-key":
                key = value
            elif name == b"x-gateway-host":
                host = value
        status = auth_failure_status(path)
        title = "Unauthorized" if status == 401 else "Forbidden"
        if key is None:
            return await send_problem(send, status, "missing X-Gateway-Key header", title)
        if host is None:
            return await send_problem(send, status, "missing X-Gateway-Host header", title)
        if not hmac.compare_digest(host.strip().lower(), self.host):
            return await send_problem(send, status, "X-Gateway-Host does not match this service's host", title)
        try:
            if self.keystore.remote:  # a network store (Redis): never block the event loop on it
                record = await anyio.to_thread.run_sync(self.keystore.authenticate, key.decode("latin-1"))
            else:
                record = self.keystore.authenticate(key.decode("latin-1"))
        except GeoengineError as exc:  # the shared state is unreachable: 503, never an unchecked request
            return await send_problem(send, exc.status, exc.detail, exc.title, exc.headers)
        if record is None:
            return await send_problem(send, status, "invalid or revoked API key", title)
        if self.keystore.counts(record, path):  # tiles and unlimited plans skip the counting thread hop
            try:
                await anyio.to_thread.run_sync(self.keystore.consume, record, path)
            except QuotaExceeded as exc:
                return await send_problem(send, 429, exc.detail, exc.title, exc.headers)
            except GeoengineError as exc:
                return await send_problem(send, exc.status, exc.detail, exc.title, exc.headers)
        state = scope.setdefault("state", {})
        state["key_id"] = record.id
        state["key_scopes"] = getattr(record, "scopes", ())
        return await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """Rejects request bodies over `limit` bytes with 413, by Content-Length or while streaming."""

    def __init__(self, app, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["method"] in ("POST", "PUT", "PATCH"):
            scope = _json_content_type(scope)
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    if int(value) > self.limit:
                        return await send_problem(send, 413, f"request body over the limit of {self.limit} bytes",
                                                  "Content too large")
                except ValueError:
                    return await send_problem(send, 400, "invalid Content-Length header")
        received = 0
        started = False

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise _TooLarge(self.limit)
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await send_problem(send, 413, f"request body over the limit of {self.limit} bytes", "Content too large")


class _TooLarge(StarletteHTTPException):
    """An HTTPException, so that FastAPI's body reader re-raises it (any other exception while reading
    the body becomes its 400 "error parsing the body") and the problem handler answers 413."""

    def __init__(self, limit: int):
        super().__init__(413, f"request body over the limit of {limit} bytes")


_NOT_JSON_DECLARED = (b"", b"application/x-www-form-urlencoded", b"text/plain")


def _json_content_type(scope):
    """Every request body of this API is JSON: a body sent without a Content-Type, or with the defaults
    of curl -d (form-urlencoded) or text/plain, is read as JSON rather than refused."""
    headers = scope["headers"]
    ctype = b""
    for name, value in headers:
        if name == b"content-type":
            ctype = value.split(b";")[0].strip().lower()
    if ctype not in _NOT_JSON_DECLARED:
        return scope
    rest = [(n, v) for n, v in headers if n != b"content-type"]
    return {**scope, "headers": rest + [(b"content-type", b"application/json")]}
