"""What the endpoints' parse steps share (their table: server/endpoints.py)."""

from __future__ import annotations

from fastapi import Request


def require_scope(request: Request, scope: str) -> None:
    """403 unless the request's key (set by the gateway) carries `scope`, e.g. `admin`."""
    from geoengine.errors import Forbidden

    if scope not in request.scope.get("state", {}).get("key_scopes", ()):
        raise Forbidden(f"this endpoint needs a key with the '{scope}' scope (geoengine keys create --scope {scope})")
