"""geoengine: a self-contained maps engine (routing, search, vector tiles, elevation).

    >>> import geoengine
    >>> engine = geoengine.open("path/to/bundle")

`import geoengine` never imports the optional HTTP façade (`geoengine.server`).
"""

from __future__ import annotations

__version__ = "0.1.0"

import os as _os  # noqa: E402

# One compile cache for every process of this installation (`geoengine warm` fills it): Numba reads
# NUMBA_CACHE_DIR when it is first imported, so set the default before anything imports it.
if "NUMBA_CACHE_DIR" not in _os.environ:
    _home = _os.environ.get("GEOENGINE_HOME") or _os.path.join(
        _os.environ.get("XDG_DATA_HOME") or _os.path.join(_os.path.expanduser("~"), ".local", "share"), "geoengine")
    _os.environ["NUMBA_CACHE_DIR"] = _os.path.join(_home, "numba-cache")

# A fresh process's first kernel call without importing all of scipy.linalg (geoengine/_startup.py).
from geoengine import _startup  # noqa: E402

_startup.install()

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
    from geoengine.frames import to_pandas as _to_pandas

    return _to_pandas(result)


def to_geopandas(result):
    """A GeoDataFrame (EPSG:4326, lon/lat) of an engine result with geometry: route legs, isochrones,
    search and reverse results, accessibility points; needs `geoengine[analysis]`."""
    from geoengine.frames import to_geopandas as _to_geopandas

    return _to_geopandas(result)


def __getattr__(name):
    if name == "Engine":
        from geoengine.engine import Engine

        return Engine
    raise AttributeError(name)
