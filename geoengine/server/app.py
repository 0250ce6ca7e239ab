"""The FastAPI application: one Engine, the gateway, the error mapping, and the routes of the endpoint table."""

from __future__ import annotations

import asyncio
import logging

from fastapi import FastAPI

from geoengine import __version__
from geoengine.config import Settings
from geoengine.engine import Engine
from geoengine.gateway import KeyStore
from geoengine.gateway.cache import CachedKeyStore
from geoengine.gateway.store import open_keystore
from geoengine.server import endpoints, problems
from geoengine.server.admission import Admission, AdmissionMiddleware
from geoengine.server.answers import AnswerCache
from geoengine.server.dispatch import Dispatcher, Middleware
from geoengine.server.framing import PROBLEM_JSON
from geoengine.server.lifecycle import Reloader, freeze_long_lived
from geoengine.server.openapi import tighten

DESCRIPTION = """
Routing, search, vector tiles and elevation from one OpenStreetMap bundle.

Every request carries the gateway headers `X-Gateway-Key` (an API key made with
`geoengine keys create`) and `X-Gateway-Host` (the service's host setting, `GEOENGINE_GATEWAY_HOST`).
Errors share one body, RFC 9457 problem details: `type`, `title`, `status`, `detail`, and for
validation errors `errors`, a list of `{field, message}` with field paths such as `locations[1].lat`.
"""

PROBLEM_SCHEMA = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "example": "about:blank"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
}


# the statuses every operation may answer (a problem body each); "auth" is the path's 401 or 403
_COMMON_RESPONSES = {
    "400": "Invalid request parameters or body", "auth": "Missing or invalid gateway credential",
    "429": "Quota used up (Retry-After says when it renews)", "404": "Unknown path or resource",
    "405": "Method not allowed on this path (the detail lists the allowed ones)",
    "413": "Request body over GEOENGINE_MAX_BODY_BYTES",
    "503": "The shared gateway state is unreachable, or the bundle lacks or lost the stage this endpoint needs",
    "5XX": "Server error (500 unexpected, 502 index unreadable, 504 computation timed out)",
}


def create_app(engine: Engine, settings: Settings | None = None, keystore: KeyStore | None = None) -> FastAPI:
    settings = settings or engine.settings
    keystore = keystore or open_keystore(settings)
    if not isinstance(keystore, CachedKeyStore):
        keystore = CachedKeyStore(keystore, settings.gateway_key_ttl_s)
    # FastAPI's OpenTelemetry bridge asks the (unconfigured) providers on every request: about 6 % of a
    # cached tile's CPU (py-spy). geoengine configures no provider, so it is off.
    app = FastAPI(title="geoengine", version=__version__, description=DESCRIPTION,
                  telemetry={"tracing": False, "metrics": False, "logs": False})
    app.state.engine = engine
    app.state.settings = settings
    app.state.keystore = keystore
    app.state.answers = AnswerCache(settings.search_cache_bytes)  # search answers (front door, hot path)
    if settings.worker_state is not None:  # several workers: tile cache clears reach them all
        from geoengine.tiles.shared import SharedCacheState

        engine.tiles.share_with_workers(SharedCacheState(settings.worker_state))
    app.state.reloader = Reloader(app, settings.bundle)  # bundle watch + reload; started by app_from_env
    problems.install(app)
    endpoints.router(app.router)  # every endpoint, generated from the table
    # every rule before an endpoint (proxies, CORS and the page, keys, quotas, damage, body limit), once:
    # the middleware applies it to what reaches ASGI, the front door asks it below ASGI
    app.state.admission = admission = Admission(app.state, keystore, settings)
    # the one fast dispatcher of the table: below ASGI in the HTTP protocol (server/protocol.py), and
    # inside admission for what is not decided there
    app.state.front_door = Dispatcher(app.state, admission)
    app.add_middleware(Middleware)
    app.add_middleware(AdmissionMiddleware, admission=admission)
    _document_gateway(app)
    return app


def _document_gateway(app: FastAPI) -> None:
    """Add the gateway headers, the problem body and the common statuses to the OpenAPI document."""
    base_openapi = app.openapi

    def openapi():
        if app.openapi_schema:
            return app.openapi_schema
        schema = base_openapi()
        comps = schema.setdefault("components", {})
        comps.setdefault("securitySchemes", {}).update(
            {
                "GatewayKey": {"type": "apiKey", "in": "header", "name": "X-Gateway-Key"},
                "GatewayHost": {"type": "apiKey", "in": "header", "name": "X-Gateway-Host"},
            }
        )
        comps.setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
        schema["security"] = [{"GatewayKey": [], "GatewayHost": []}]
        ref = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
        for path, ops in schema.get("paths", {}).items():
            auth = str(endpoints.auth_status(path))
            for op in ops.values():
                responses = op.setdefault("responses", {})
                responses.pop("422", None) if _is_default_422(responses.get("422")) else None
                for code, text in _COMMON_RESPONSES.items():
                    if code != "413" or "requestBody" in op:
                        responses.setdefault(auth if code == "auth" else code, {"description": text})
                for code, resp in responses.items():
                    if code[0] in "45" and "content" not in resp:
                        resp["content"] = ref
        tighten(schema, app.state.settings)  # the cross-field rules and grammars the models cannot state
        app.openapi_schema = schema
        return schema

    app.openapi = openapi


def _is_default_422(resp) -> bool:
    try:
        return resp["content"]["application/json"]["schema"]["$ref"].endswith("HTTPValidationError")
    except (TypeError, KeyError):
        return False


def app_from_env() -> FastAPI:
    """Factory for `uvicorn --factory` worker processes: settings and bundle from the environment."""
    settings = Settings.from_env()
    logging.basicConfig(level=settings.log_level.upper())
    if settings.bundle is None:
        raise SystemExit("GEOENGINE_BUNDLE is not set: start the server with `geoengine serve`")
    engine = Engine.open(settings.bundle, settings=settings)
    engine.warm()
    app = create_app(engine, settings)
    try:  # uvicorn's workers call this factory on their running event loop: the bundle watch runs on it
        loop = asyncio.get_running_loop()
    except RuntimeError:  # `geoengine serve` with one worker makes the app before the loop
        loop = None
    app.state.reloader.start(loop)
    freeze_long_lived()  # everything made so far lives as long as the worker (or until a reload)
    return app
