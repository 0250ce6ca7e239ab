"""The registry of build stages, in build order. Each entry names a module exposing `STAGE`."""

from __future__ import annotations

import importlib

STAGE_MODULES: list[str] = [
    "geoengine.bundler.source",
    "geoengine.graph.stage",
    "geoengine.elevation.stage",
    "geoengine.routing.stage",
    "geoengine.search.stage",
    "geoengine.tiles.stage",
]


def all_stages() -> list:
    """The `Stage` objects (geoengine.bundler.pipeline.Stage) in build order."""
    return [importlib.import_module(m).STAGE for m in STAGE_MODULES]
