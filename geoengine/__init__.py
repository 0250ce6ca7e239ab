"""geoengine: a self-contained maps engine (routing, search, vector tiles, elevation).

    >>> import geoengine
    >>> engine = geoengine.open("path/to/bundle")

`import geoengine` never imports the optional HTTP façade (`geoengine.server`).
"""

from __future__ import annotations

__version__ = "0.1.0"

from geoengine.errors import (  # noqa: E402
    BundleError,
    GeoengineError,
    InvalidRequest,
    NoRoute,
    NotFound,
    OutsideCoverage,
    Unavailable,
)

__all__ = [
    "__version__",
    "open",
    "Engine",
    "GeoengineError",
    "BundleError",
    "InvalidRequest",
    "NotFound",
    "NoRoute",
    "OutsideCoverage",
    "Unavailable",
    "to_pandas",
    "to_geopandas",
]


def open(path, settings=None):  # noqa: A001 - the public name the docs promise
    """Open the bundle folder at `path` and return its `Engine`."""
    from geoengine.engine import Engine

    return Engine.open(path, settings=settings)


def to_pandas(result):
    """A pandas DataFrame of an engine result (matrix, route, isochrone(s), search, reverse, accessibility,
    nearest POIs); needs `geoengine[analysis]`. See docs/analysis.md."""
    from geoengine.analysis.frames import to_pandas as _to_pandas

    return _to_pandas(result)


def to_geopandas(result):
    """A GeoDataFrame (EPSG:4326, lon/lat) of an engine result with geometry: route legs, isochrones,
    search and reverse results, accessibility points; needs `geoengine[analysis]`."""
    from geoengine.analysis.frames import to_geopandas as _to_geopandas

    return _to_geopandas(result)


def __getattr__(name):
    if name == "Engine":
        from geoengine.engine import Engine

        return Engine
    raise AttributeError(name)
