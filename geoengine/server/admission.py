"""Admission: every rule a request passes before an endpoint answers it, in one object.

    trusted proxies   forwarded headers believed only from GEOENGINE_FORWARDED_ALLOW_IPS (server/proxy.py)
    web access        CORS preflights and the allow-list, the map page, publishable keys and page
                      sessions (server/web/access.py)
    gateway           X-Gateway-Host and X-Gateway-Key (401 on the spec's matrix and directions listings,
                      403 elsewhere), the key through the in-process cache (gateway/cache.py), quotas
                      counted exactly (429 with Retry-After)
    bundle damage     503 on the endpoint groups whose bundle stage lost or changed a file (lifecycle.py)
    body limit        413 over GEOENGINE_MAX_BODY_BYTES; a body without a JSON Content-Type read as JSON

`AdmissionMiddleware` applies them to every request that reaches the ASGI application (`admit`).
The fast dispatch below ASGI (server/dispatch.py) asks `quick`, which applies the same rules where
they are decided without I/O (a key in the in-process cache, a path its plan does not count, no
browser origin, no trusted forwarded header, a body within the limit, the group not damaged) and
declines everything else, which then goes through `admit`. No rule is written anywhere else.
"""

from __future__ import annotations

import hmac

import anyio
from starlette.exceptions import HTTPException as StarletteHTTPException

from geoengine.errors import GeoengineError
from geoengine.server.endpoints import auth_status, path_class
from geoengine.server.framing import send_problem
from geoengine.server.proxy import TrustedProxies, apply_forwarded

# Documentation routes a browser opens without gateway headers.
OPEN_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
FORWARDED = (b"x-forwarded-for", b"x-forwarded-proto", b"x-forwarded-host", b"x-forwarded-prefix", b"forwarded")
# request bodies of this API are JSON: undeclared, curl -d's form type and text/plain are read as JSON
_READ_AS_JSON = (b"", b"application/x-www-form-urlencoded", b"text/plain")
_JSON_TYPES = (b"application/json", *_READ_AS_JSON)


class Heads:
    """What admission (and the tile endpoint's fast path: accept, inm) reads of a request's headers: the
    last value of each, as the layers read them. `headers`: raw (name, value) pairs, or a dict of them
    (the protocol's raw path: one value a name)."""

    __slots__ = ("key", "host", "origin", "length", "ctype", "accept", "inm", "chunked", "forwarded", "cookie",
                 "site")

    def __init__(self, headers):
        d = headers if type(headers) is dict else dict(headers)
        get = d.get
        self.key, self.host, self.origin = get(b"x-gateway-key"), get(b"x-gateway-host"), get(b"origin")
        self.length, self.ctype = get(b"content-length"), get(b"content-type")
        self.accept, self.inm = get(b"accept-encoding"), get(b"if-none-match")
        self.chunked = b"transfer-encoding" in d
        self.cookie, self.site = get(b"cookie"), get(b"sec-fetch-site")
        self.forwarded = not d.keys().isdisjoint(FORWARDED)


class Admission:
    """The rules, each once; `admit` (ASGI) and `quick` (below ASGI) apply them."""

    def __init__(self, state, keystore, settings):
        from geoengine.server.web.access import WebAccess

        self.state = state  # app.state: the served engine's bundle watch
        self._state = vars(state).get("_state")  # a Starlette State's dict (a read without an exception)
        self.keystore = keystore  # a CachedKeyStore
        self.host = settings.gateway_host.strip().lower().encode()  # host names compare case-insensitively
        self.max_body = int(settings.max_body_bytes)
        self.proxies = TrustedProxies(settings.forwarded_allow_ips)
        self.web = WebAccess(keystore, settings)
        self._counted: dict[tuple[str, str], bool] = {}  # (plan, quota class) -> counted

    # -- the rules --------------------------------------------------------------------------------
    def host_matches(self, host: bytes) -> bool:
        return hmac.compare_digest(host.strip().lower(), self.host)

    def counted(self, record, path: str) -> bool:
        """Whether the key's plan counts a request to `path` (then `consume` runs in a thread)."""
        plan = self.keystore.plans.get(record.plan)
        if plan is not None and not plan.pools:
            return False  # a plan without pools counts nothing
        quota = path_class(path)[0]  # the endpoint table's class (server/endpoints.py)
        hit = self._counted.get((record.plan, quota))
        if hit is None:
            hit = self._counted[(record.plan, quota)] = self.keystore.counts(record, path)
        return hit

    def damaged(self, path: str) -> str | None:
        """Why the bundle group of `path` cannot be served (lifecycle.BundleWatch), or None."""
        state = self._state
        watch = state.get("bundle_watch") if state is not None else getattr(self.state, "bundle_watch", None)
        return None if watch is None else watch.unavailable(path)

    def body_refusal(self, length: bytes | None) -> tuple[int, str, str | None] | None:
        """(status, detail, title) refusing a declared body length, or None."""
        if length is None:
            return None
        try:
            if int(length) <= self.max_body:
                return None
        except ValueError:
            return 400, "invalid Content-Length header", None
        return 413, f"request body over the limit of {self.max_body} bytes", "Content too large"

    @staticmethod
    def json_body(ctype: bytes | None) -> bool:
        """Whether a body with this Content-Type is read as JSON (every body of this API is JSON)."""
        return (b"" if ctype is None else ctype.split(b";")[0].strip().lower()) in _JSON_TYPES

    # -- below ASGI -------------------------------------------------------------------------------
    def quick(self, path: str, heads: Heads, body: bool = False, session: bool = False):
        """The key's cache entry (record, expiry), or a page session's usage id, when every rule admits
        the request without I/O, else None (then `admit` decides). `body`: a POST whose body the caller
        will read (its length given); `session`: a page session may be admitted (only where the caller
        then answers for sure: the session's rate limit is taken here)."""
        if heads.origin is not None or heads.chunked or (heads.forwarded and self.proxies):
            return None  # CORS and publishable keys, streamed bodies, proxies: `admit`
        if heads.key is None and session and not body and heads.length is None and heads.cookie is not None:
            return None if self.damaged(path) else self.web.quick_session(heads, path, self.counted)
        if heads.key is None or heads.host is None or not self.host_matches(heads.host):
            return None  # the gateway writes the 401/403
        if body:
            if heads.length is None or heads.length == b"0" or self.body_refusal(heads.length) is not None \
                    or not self.json_body(heads.ctype):
                return None
        elif heads.length is not None:
            return None
        key = heads.key.decode("latin-1")
        if key.startswith("pk_"):
            return None
        hit = self.keystore.peek_entry(key)
        if hit is None or self.counted(hit[0], path) or self.damaged(path):
            return None
        return hit

    # -- ASGI -------------------------------------------------------------------------------------
    async def admit(self, scope, receive, send, app):
        """Apply every rule to one HTTP request, then call `app` with it (or answer the refusal)."""
        if self.proxies:
            apply_forwarded(scope, self.proxies)
        heads = Heads(scope["headers"])
        path = scope["path"]
        entered = await self.web.enter(scope, send, heads, path, self._count)
        if entered is None:
            return None  # answered (a preflight, a page asset, a refusal)
        send, principal = entered
        if principal is None and path not in OPEN_PATHS and not await self._gateway(scope, send, heads, path):
            return None
        why = self.damaged(path)
        if why:
            return await send_problem(send, 503, f"{why}; this endpoint group is unavailable until the bundle is "
                                      "republished or the server reloaded (SIGHUP)", "Bundle not usable",
                                      {"Retry-After": "30"})
        return await self._limited(scope, receive, send, heads, app)

    async def _gateway(self, scope, send, heads: Heads, path: str) -> bool:
        status = auth_status(path)
        if heads.key is None:
            refusal = "missing X-Gateway-Key header"
        elif heads.host is None:
            refusal = "missing X-Gateway-Host header"
        elif not self.host_matches(heads.host):
            refusal = "X-Gateway-Host does not match this service's host"
        else:
            key = heads.key.decode("latin-1")
            try:
                if self.keystore.remote:  # a network store (Redis): never block the event loop on it
                    record = await anyio.to_thread.run_sync(self.keystore.authenticate, key)
                else:
                    record = self.keystore.authenticate(key)
            except GeoengineError as exc:  # the shared state is unreachable: 503, never an unchecked request
                await send_problem(send, exc.status, exc.detail, exc.title, exc.headers)
                return False
            refusal = "invalid or revoked API key" if record is None else None
        if refusal is not None:
            await send_problem(send, status, refusal, "Unauthorized" if status == 401 else "Forbidden")
            return False
        if not await self._count(send, record, path):
            return False
        state = scope.setdefault("state", {})
        state["key_id"] = record.id
        state["key_scopes"] = getattr(record, "scopes", ())
        return True

    async def _count(self, send, record, path: str) -> bool:
        """Count the request on the record's plan (a thread: the store's transaction); False when the
        refusal (429, or 503 for an unreachable store) was sent."""
        if not self.counted(record, path):
            return True
        try:
            await anyio.to_thread.run_sync(self.keystore.consume, record, path)
        except GeoengineError as exc:  # QuotaExceeded: 429 with Retry-After
            await send_problem(send, exc.status, exc.detail, exc.title, exc.headers)
            return False
        return True

    async def _limited(self, scope, receive, send, heads: Heads, app):
        if scope["method"] in ("POST", "PUT", "PATCH"):
            scope = _json_content_type(scope, heads.ctype)
        refusal = self.body_refusal(heads.length)
        if refusal is not None:
            return await send_problem(send, *refusal)
        limit = self.max_body
        received = 0
        started = False

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise _TooLarge(limit)
            return message

        async def tracking_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await send_problem(send, 413, f"request body over the limit of {limit} bytes", "Content too large")


class AdmissionMiddleware:
    """The ASGI side of `Admission` (app.py installs it outside the endpoints' dispatch)."""

    def __init__(self, app, admission: Admission):
        self.app = app
        self.admission = admission

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        return await self.admission.admit(scope, receive, send, self.app)


class _TooLarge(StarletteHTTPException):
    """An HTTPException, so that FastAPI's body reader re-raises it (any other exception while reading
    the body becomes its 400 "error parsing the body") and the problem handler answers 413."""

    def __init__(self, limit: int):
        super().__init__(413, f"request body over the limit of {limit} bytes")


def _json_content_type(scope, ctype: bytes | None):
    """A body sent without a Content-Type, or with curl -d's form type or text/plain, reaches the routes
    declared as JSON."""
    if (b"" if ctype is None else ctype.split(b";")[0].strip().lower()) not in _READ_AS_JSON:
        return scope
    rest = [(n, v) for n, v in scope["headers"] if n != b"content-type"]
    return {**scope, "headers": rest + [(b"content-type", b"application/json")]}
