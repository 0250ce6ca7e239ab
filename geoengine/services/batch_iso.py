"""Isochrones of many origins in one call (`Engine.isochrones`).

Every origin is the same pipeline as POST /isochrone (one compiled reach search, rasterising and
contouring kernels that release the GIL), run on a thread pool as wide as the machine's cores; results
come back in origin order. Bad input raises one InvalidRequest naming the argument (`origins[i]`,
`contours`, `costing`), checked before any work starts.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from geoengine.errors import FieldError, InvalidRequest


def _contours(contours) -> list[dict]:
    if isinstance(contours, int | float | dict):
        contours = [contours]
    try:
        items = list(contours)
    except TypeError:
        raise InvalidRequest.field("contours", "must be a list of minutes or of {time|distance: ...}") from None
    if not items:
        raise InvalidRequest.field("contours", "give at least one contour")
    out = []
    for c in items:
        if isinstance(c, dict):
            out.append(c)
        elif isinstance(c, int | float | np.integer | np.floating) and not isinstance(c, bool):
            out.append({"time": float(c)})
        else:
            raise InvalidRequest.field("contours", f"{c!r} is neither minutes nor a {{time|distance: ...}} object")
    return out


def isochrones(engine, origins, contours, costing: str = "auto", costing_options=None, *, polygons=True,
               denoise=1.0, generalize=None, as_frame=False, progress=None):
    from geoengine.routing.access import points_array
    from geoengine.services.isochrone import IsochroneRequest, isochrone
    from geoengine.validation import validate

    pts = points_array(origins, "origins")
    base = {"costing": costing, "costing_options": costing_options, "contours": _contours(contours),
            "polygons": polygons, "denoise": denoise, "generalize": generalize, "show_locations": False}
    # validate once with the first origin (same model, same messages as /isochrone) ...
    validate(IsochroneRequest, {**base, "locations": [{"lon": float(pts[0, 0]), "lat": float(pts[0, 1])}]})
    reqs = [IsochroneRequest.model_validate({**base, "locations": [{"lon": float(x), "lat": float(y)}]})
            for x, y in pts.tolist()]
    router = engine.router

    def one(i):
        try:
            return isochrone(router, reqs[i])
        except InvalidRequest as exc:  # name the origin, not locations[0]
            raise InvalidRequest(errors=[FieldError(f"origins[{i}]", e.message) for e in exc.errors]
                                 or [FieldError(f"origins[{i}]", exc.detail)]) from None

    from geoengine.progress import bar

    n = len(reqs)
    with bar(n, "isochrones", progress) as tick, ThreadPoolExecutor(max_workers=min(os.cpu_count() or 1, n)) as ex:
        results = []
        for fc in ex.map(one, range(n)):
            results.append(fc)
            tick(1)
    if not as_frame:
        return results
    from geoengine.frames import to_geopandas

    return to_geopandas(results)
