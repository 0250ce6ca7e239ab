"""`WebAccessMiddleware`: the map page, page sessions, CORS and publishable keys, outside the gateway.

In order, for each HTTP request:
1. A CORS preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) is answered here,
   without a key: 204 with the CORS headers when the origin is in the allow-list
   (GEOENGINE_CORS_ORIGINS, default none), else 403 without them (the browser then refuses).
2. `GET|HEAD /` and `/web/...` serve the page and its assets, open like `/docs`; `/` also issues a
   page session cookie (see session.py).
3. A request whose `X-Gateway-Key` is a publishable key (`pk_...`) is checked here: its `Origin` must be
   in the allow-list and among the key's origins, its path in the key's scopes; it is counted on the
   key's plan.
4. A request without `X-Gateway-Key` that carries a valid page session cookie, from the same origin
   (`Sec-Fetch-Site` same-origin, or an `Origin` equal to the request's own), is rate limited and
   counted on the session plan.
A request passed by 3 or 4 is marked in `scope["state"]["web_principal"]` and the gateway lets it
through; anything else goes to the gateway unchanged. Responses to allowed origins get
`Access-Control-Allow-Origin` and `Vary: Origin`.
"""

from __future__ import annotations

import logging

import anyio

from geoengine.errors import GeoengineError, QuotaExceeded
from geoengine.gateway import KeyRecord, KeyStore
from geoengine.gateway.publishable import normalise_origin, parse_origins, path_scope
from geoengine.gateway.store import open_publishable
from geoengine.server.middleware import send_problem
from geoengine.server.web.assets import Assets, assets_root
from geoengine.server.web.session import RateLimiter, SessionSigner, load_secret, read_cookie

log = logging.getLogger("geoengine.web")

ALLOW_METHODS = b"GET, HEAD, POST, OPTIONS"
ALLOW_HEADERS = b"X-Gateway-Key, X-Gateway-Host, Content-Type, Accept, If-None-Match"
EXPOSE_HEADERS = b"ETag, Retry-After, Content-Encoding"
# Paths a page session may not call (administration).
SESSION_DENIED_SUFFIXES = ("/cache/clear",)


class WebAccessMiddleware:
    def __init__(self, app, keystore: KeyStore, settings):
        self.app = app
        self.keystore = keystore
        self.allowed = parse_origins(settings.cors_origins)
        self.publishable = open_publishable(settings, keystore)  # in Redis when the gateway is
        self.signer = SessionSigner(load_secret(settings.state), settings.session_ttl_s)
        self.limiter = RateLimiter(settings.session_rate)
        self.session_plan = settings.session_plan
        self.assets = Assets(assets_root(settings.web_assets))
        missing = self.assets.missing()
        if missing:
            log.warning("map page assets missing (run ./dev setup): %s", ", ".join(missing))

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path, method = scope["path"], scope["method"]
        origin = key = None
        preflight = False
        for name, value in scope["headers"]:
            if name == b"origin":
                origin = value.decode("latin-1")
            elif name == b"x-gateway-key":
                key = value.decode("latin-1")
            elif name == b"access-control-request-method":
                preflight = True
        allowed_origin = self._allowed(origin)
        if method == "OPTIONS" and origin is not None and preflight:
            if allowed_origin is None:
                return await send_problem(send, 403, f"origin {origin[:200]} is not allowed (CORS allow-list)", "Forbidden")
            return await _send_preflight(send, allowed_origin)
        if method in ("GET", "HEAD") and (path == "/" or path.startswith("/web/")):
            return await self._asset(scope, send, path, method)
        if allowed_origin is not None:
            send = _with_cors(send, allowed_origin)
        if key is not None and key.startswith("pk_"):
            return await self._publishable(scope, receive, send, key, origin, allowed_origin, path)
        if key is None:
            cookie = read_cookie(scope["headers"])
            if cookie is not None:
                return await self._session(scope, receive, send, cookie, origin, path)
        return await self.app(scope, receive, send)

    def _allowed(self, origin: str | None) -> str | None:
        if origin is None or not self.allowed:
            return None
        try:
            norm = normalise_origin(origin)
        except ValueError:
            return None
        return origin if norm in self.allowed else None

    async def _count(self, send, usage_id: str, plan: str, path: str) -> bool:
        record = KeyRecord(usage_id, plan, "", "")
        if not self.keystore.counts(record, path):
            return True
        try:
            await anyio.to_thread.run_sync(self.keystore.consume, record, path)
        except QuotaExceeded as exc:
            await send_problem(send, 429, exc.detail, exc.title, exc.headers)
            return False
        except GeoengineError as exc:
            await send_problem(send, exc.status, exc.detail, exc.title, exc.headers)
            return False
        return True

    async def _publishable(self, scope, receive, send, key, origin, allowed_origin, path):
        try:  # a Redis round trip when the keys are shared: off the event loop
            record = await anyio.to_thread.run_sync(self.publishable.authenticate, key)
        except GeoengineError as exc:  # Redis unreachable: 503, never an unchecked request
            return await send_problem(send, exc.status, exc.detail, exc.title, exc.headers)
        if record is None:
            return await send_problem(send, 403, "invalid or revoked publishable key", "Forbidden")
        if origin is None or allowed_origin is None:
            return await send_problem(send, 403, "a publishable key is accepted only from an allowed browser origin",
                                      "Forbidden")
        if normalise_origin(origin) not in record.origins:
            return await send_problem(send, 403, "this publishable key is not valid for this origin", "Forbidden")
        wanted = path_scope(path)
        if wanted is None or wanted not in record.scopes:
            return await send_problem(send, 403, f"this publishable key's scopes ({', '.join(record.scopes)}) "
                                                 f"do not cover {path[:200]}", "Forbidden")
        if not await self._count(send, record.usage_id, record.plan, path):
            return
        scope.setdefault("state", {})["web_principal"] = record.usage_id
        scope["state"]["key_id"] = record.usage_id
        return await self.app(scope, receive, send)

    async def _session(self, scope, receive, send, cookie, origin, path):
        sid = self.signer.verify(cookie)
        if sid is None:
            return await send_problem(send, 403, "the page session has expired or is not valid: reload the page",
                                      "Forbidden")
        fetch_site = None
        for name, value in scope["headers"]:
            if name == b"sec-fetch-site":
                fetch_site = value
        if fetch_site not in (None, b"same-origin", b"none") or (origin is not None and origin != _own_origin(scope)):
            return await send_problem(send, 403, "a page session is accepted only from the page's own origin",
                                      "Forbidden")
        if path.endswith(SESSION_DENIED_SUFFIXES):
            return await send_problem(send, 403, "a page session may not call this endpoint", "Forbidden")
        retry = self.limiter.hit(sid)
        if retry:
            return await send_problem(send, 429, f"the page session's rate limit of {self.limiter.per_minute} "
                                                 "requests per minute is used up", "Too Many Requests",
                                      {"Retry-After": str(retry)})
        if not await self._count(send, f"ws_{sid}", self.session_plan, path):
            return
        scope.setdefault("state", {})["web_principal"] = f"ws_{sid}"
        scope["state"]["key_id"] = f"ws_{sid}"
        return await self.app(scope, receive, send)

    async def _asset(self, scope, send, path, method):
        file = self.assets.resolve(path)
        if file is None:
            return await send_problem(send, 404, f"no such page asset: {path[:200]}", "Not Found")
        body = await anyio.to_thread.run_sync(file.read_bytes)
        headers = [
            (b"content-type", self.assets.content_type(file).encode()),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", self.assets.cache_control(file).encode()),
            (b"x-content-type-options", b"nosniff"),
        ]
        if path == "/":
            value, _ = self.signer.issue()
            headers.append((b"set-cookie", self.signer.cookie_header(value, scope.get("scheme") == "https")))
            headers.append((b"referrer-policy", b"same-origin"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


def _own_origin(scope) -> str:
    host = ""
    for name, value in scope["headers"]:
        if name == b"host":
            host = value.decode("latin-1")
    return f"{scope.get('scheme', 'http')}://{host}"


async def _send_preflight(send, origin: str):
    headers = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-allow-methods", ALLOW_METHODS),
        (b"access-control-allow-headers", ALLOW_HEADERS),
        (b"access-control-max-age", b"600"),
        (b"vary", b"Origin"),
        (b"content-length", b"0"),
    ]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _with_cors(send, origin: str):
    extra = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-expose-headers", EXPOSE_HEADERS),
    ]

    async def cors_send(message):
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"vary"]
            vary = [v for k, v in message.get("headers", []) if k.lower() == b"vary"]
            headers.append((b"vary", b", ".join([*vary, b"Origin"])))
            message = {**message, "headers": headers + extra}
        await send(message)

    return cors_send
