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
]


def open(path, settings=None):  # noqa: A001 - the public name the docs promise
    """Open the bundle folder at `path` and return its `Engine`."""
    from geoengine.engine import Engine

    return Engine.open(path, settings=settings)


def __getattr__(name):
    if name == "Engine":
        from geoengine.engine import Engine

        return Engine
    raise AttributeError(name)
