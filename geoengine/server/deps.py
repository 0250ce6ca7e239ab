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


def get_settings(request: Request):
    return request.app.state.settings
