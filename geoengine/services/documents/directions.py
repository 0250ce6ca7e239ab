"""The POST /v1/routing/directions document from typed routes: metres and seconds straight from the
Route (no unit conversion), GeoJSON [lon, lat] or polyline6 geometry, one step per maneuver."""

from __future__ import annotations

from typing import Any

import numpy as np

from geoengine.geo import encode_polyline


def step_document(m) -> dict:
    d = {"instruction": m.instruction, "distance_m": round(m.length_m, 1), "duration_s": round(m.time_s, 1),
         "maneuver": m.type_name, "bearing": m.bearing_after, "bearing_before": m.bearing_before}
    if m.street_names:
        d["name"] = "/".join(m.street_names)
    return d


def route_document(route, geometry: str, steps: bool) -> dict:
    lon, lat = route.lon, route.lat
    if geometry == "polyline6":
        geom: Any = encode_polyline(lat, lon, 6)
    else:
        geom = {"type": "LineString", "coordinates": np.round(np.column_stack([lon, lat]), 6).tolist()}
    legs = []
    for leg in route.legs:
        doc = {"distance_m": round(leg.length_m, 1), "duration_s": round(leg.time_s, 1)}
        if steps:
            doc["steps"] = [step_document(m) for m in leg.maneuvers or []]
        legs.append(doc)
    return {"distance_m": round(route.length_m, 1), "duration_s": round(route.time_s, 1), "geometry": geom,
            "legs": legs}


def directions_document(result, geometry: str, steps: bool) -> dict:
    """{routes: [...], waypoints: [...]}: the waypoints are the positions the best route actually starts
    from and reaches (the candidate the search chose)."""
    best = result.best
    ends = [(float(leg.lon[0]), float(leg.lat[0])) for leg in best.legs] + [(float(best.legs[-1].lon[-1]),
                                                                             float(best.legs[-1].lat[-1]))]
    snapped = [{"lon": round(lo, 6), "lat": round(la, 6)} for lo, la in ends]
    return {"routes": [route_document(r, geometry, steps) for r in result.routes], "waypoints": snapped}
