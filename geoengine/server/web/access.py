"""`WebAccess`: the map page, page sessions, CORS and publishable keys; the web part of admission
(server/admission.py calls `enter` before the gateway).

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
A request passed by 3 or 4 has a principal (its usage id, also `scope["state"]["key_id"]`) and skips the
gateway; anything else goes to the gateway unchanged. Responses to allowed origins get
`Access-Control-Allow-Origin` and `Vary: Origin`.
"""

from __future__ import annotations

import logging
import time

import anyio

from geoengine.errors import GeoengineError
from geoengine.gateway import KeyRecord, KeyStore
from geoengine.gateway.publishable import normalise_origin, parse_origins, path_scope
from geoengine.gateway.store import open_publishable
from geoengine.server.framing import send_answer, send_problem
from geoengine.server.web.assets import Assets, assets_root
from geoengine.server.web.session import RateLimiter, SessionSigner, load_secret, read_cookie

log = logging.getLogger("geoengine.web")

ALLOW_METHODS = b"GET, HEAD, POST, OPTIONS"
ALLOW_HEADERS = b"X-Gateway-Key, X-Gateway-Host, Content-Type, Accept, If-None-Match"
EXPOSE_HEADERS = b"ETag, Retry-After, Content-Encoding"
# Paths a page session may not call (administration).
SESSION_DENIED_SUFFIXES = ("/cache/clear",)


class WebAccess:
    def __init__(self, keystore: KeyStore, settings):
        self.keystore = keystore
        self.allowed = parse_origins(settings.cors_origins)
        self.publishable = open_publishable(settings, keystore)  # in Redis when the gateway is
        self.signer = SessionSigner(load_secret(settings.state), settings.session_ttl_s)
        self.limiter = RateLimiter(settings.session_rate)
        self.session_plan = settings.session_plan
        self._session_record = KeyRecord("ws", self.session_plan, "", "")  # what the plan counts
        self._verified: dict[bytes, tuple[str, int]] = {}  # Cookie header -> (session id, expiry): `quick_session`
        self.assets = Assets(assets_root(settings.web_assets))
        missing = self.assets.missing()
        if missing:
            log.warning("map page assets missing (run ./dev setup): %s", ", ".join(missing))

    async def enter(self, scope, send, heads, path: str, count):
        """(send, principal) for the request to go on with (`send` adding the CORS headers for an
        allowed origin; `principal` the usage id of a publishable key or page session, else None), or
        None when it was answered here. `count(send, record, path)`: admission's quota count."""
        method = scope["method"]
        origin = None if heads.origin is None else heads.origin.decode("latin-1")
        key = None if heads.key is None else heads.key.decode("latin-1")
        allowed_origin = self._allowed(origin)
        if method == "OPTIONS" and origin is not None and _header(scope, b"access-control-request-method"):
            if allowed_origin is None:
                await send_problem(send, 403, f"origin {origin[:200]} is not allowed (CORS allow-list)", "Forbidden")
                return None
            await _send_preflight(send, allowed_origin)
            return None
        if method in ("GET", "HEAD") and (path == "/" or path.startswith("/web/")):
            await self._asset(scope, send, path, method)
            return None
        if allowed_origin is not None:
            send = _with_cors(send, allowed_origin)
        principal = None
        if key is not None and key.startswith("pk_"):
            principal = await self._publishable(send, key, origin, allowed_origin, path, count)
        elif key is None:
            cookie = read_cookie(scope["headers"])
            if cookie is None:
                return send, None
            principal = await self._session(scope, send, cookie, origin, path, count)
        else:
            return send, None
        if principal is None:
            return None
        scope.setdefault("state", {})["key_id"] = principal
        return send, principal

    def _allowed(self, origin: str | None) -> str | None:
        if origin is None or not self.allowed:
            return None
        try:
            norm = normalise_origin(origin)
        except ValueError:
            return None
        return origin if norm in self.allowed else None

    async def _publishable(self, send, key, origin, allowed_origin, path, count):
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
        if await count(send, KeyRecord(record.usage_id, record.plan, "", ""), path):
            return record.usage_id
        return None

    def quick_session(self, heads, path: str, counted) -> str | None:
        """The usage id of a page session admitted without I/O (the front door, server/admission.py
        `quick`): the rules of `_session` for a request without `Origin`, a plan that does not count the
        path (`counted(record, path)`) and the rate limit not reached; else None (then `_session` decides
        and writes the refusal)."""
        sid = self._verified.get(heads.cookie)
        if sid is None or sid[1] < time.time():
            cookie = read_cookie(((b"cookie", heads.cookie),))
            sid = self.signer.verified(cookie)
            if sid is None:
                return None
            if len(self._verified) >= 4096:
                self._verified.clear()
            self._verified[heads.cookie] = sid
        if counted(self._session_record, path) or self._refusal(sid[0], heads.site, True, path) is not None:
            return None
        return f"ws_{sid[0]}"

    def _refusal(self, sid: str, fetch_site: bytes | None, same_origin: bool, path: str):
        """The one set of rules for a valid page session (both `_session` and `quick_session` ask it):
        None when the request may go on (its rate limit then taken), else (status, detail, title, headers)."""
        if fetch_site not in (None, b"same-origin", b"none") or not same_origin:
            return 403, "a page session is accepted only from the page's own origin", "Forbidden", None
        if path.endswith(SESSION_DENIED_SUFFIXES):
            return 403, "a page session may not call this endpoint", "Forbidden", None
        retry = self.limiter.hit(sid)
        if retry:
            return (429, f"the page session's rate limit of {self.limiter.per_minute} requests per minute is used up",
                    "Too Many Requests", {"Retry-After": str(retry)})
        return None

    async def _session(self, scope, send, cookie, origin, path, count):
        sid = self.signer.verify(cookie)
        if sid is None:
            return await send_problem(send, 403, "the page session has expired or is not valid: reload the page",
                                      "Forbidden")
        refusal = self._refusal(sid, _header(scope, b"sec-fetch-site"), origin is None or origin == _own_origin(scope),
                                path)
        if refusal is not None:
            return await send_problem(send, *refusal)
        if await count(send, KeyRecord(f"ws_{sid}", self.session_plan, "", ""), path):
            return f"ws_{sid}"
        return None

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
        await send_answer(send, (200, headers, body), method == "HEAD")


def _header(scope, name: bytes) -> bytes | None:
    """The last value of a request header, or None."""
    found = None
    for key, value in scope["headers"]:
        if key == name:
            found = value
    return found


def _own_origin(scope) -> str:
    host = _header(scope, b"host")
    return f"{scope.get('scheme', 'http')}://{'' if host is None else host.decode('latin-1')}"


async def _send_preflight(send, origin: str):
    headers = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-allow-methods", ALLOW_METHODS),
        (b"access-control-allow-headers", ALLOW_HEADERS),
        (b"access-control-max-age", b"600"),
        (b"vary", b"Origin"),
        (b"content-length", b"0"),
    ]
    await send_answer(send, (204, headers, b""))


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
