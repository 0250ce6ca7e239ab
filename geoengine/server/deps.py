"""FastAPI dependencies shared by the route modules."""

from __future__ import annotations

from fastapi import Request

from geoengine.engine import Engine
from geoengine.errors import Unavailable


def get_engine(request: Request) -> Engine:
    engine = getattr(request.app.state, "engine", None)
    if engine is None:
        raise Unavailable("the engine is not initialised")
    return engine


def require_scope(request: Request, scope: str) -> None:
    """403 unless the request's key (set by the gateway) carries `scope`, e.g. `admin`."""
    from geoengine.errors import Forbidden

    if scope not in request.scope.get("state", {}).get("key_scopes", ()):
        raise Forbidden(f"this endpoint needs a key with the '{scope}' scope (geoengine keys create --scope {scope})")


def get_settings(request: Request):
    return request.app.state.settings


async def run_engine(request: Request, fn, /, *args, **kwargs):
    """Run a blocking engine call in the thread pool, bounded by GEOENGINE_REQUEST_TIMEOUT (then 504).

    The Numba kernels release the GIL, so concurrent requests use every core.
    """
    import functools

    import anyio

    from geoengine.errors import BackendTimeout

    timeout = request.app.state.settings.request_timeout_s
    call = functools.partial(fn, *args, **kwargs)
    try:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
    except TimeoutError:
        raise BackendTimeout(f"the computation took longer than {timeout:g} s") from None
