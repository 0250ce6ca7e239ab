"""The matrix service: POST /matrix (many-to-many times and distances) from the router's arrays.

    doc = matrix_document(engine.router, MatrixRequest(...))
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from geoengine.errors import InvalidRequest
from geoengine.geo import metres_per_unit
from geoengine.routing.router import radii
from geoengine.services.models import LatLon, Location, MatrixCosting, Units, costing_validator, unit_alias

MAX_MATRIX_CELLS = 10_000  # sources x targets of one request (a 100 x 100 answer is about 0.6 MB)


class MatrixRequest(BaseModel):
    """POST /matrix."""

    model_config = ConfigDict(extra="ignore", strict=True)

    sources: list[Location] = Field(min_length=1, max_length=MAX_MATRIX_CELLS,
                                    description=f"At least 1; sources x targets at most {MAX_MATRIX_CELLS}")
    targets: list[Location] = Field(min_length=1, max_length=MAX_MATRIX_CELLS,
                                    description=f"At least 1; sources x targets at most {MAX_MATRIX_CELLS}")
    costing: MatrixCosting = "auto"
    costing_options: dict[str, Any] | None = None
    units: Units = "kilometers"
    date_time: dict[str, Any] | None = Field(
        None, description="Departure time {type: 0 now | 1 depart_at | 3 invariant, value: 'YYYY-MM-DDTHH:MM'}; "
        "also accepted inside costing_options. Each cell then carries its estimated arrival `date_time`.")
    id: str | None = None

    _norm_units = field_validator("units", mode="before")(unit_alias)
    _costing_known = costing_validator("matrix")

    @model_validator(mode="after")
    def _cells(self):
        cells = len(self.sources) * len(self.targets)
        if cells > MAX_MATRIX_CELLS:
            raise ValueError(f"{len(self.sources)} sources x {len(self.targets)} targets = {cells} cells; "
                             f"the limit is {MAX_MATRIX_CELLS} cells a request")
        return self


class MatrixCell(BaseModel):
    to_index: int
    from_index: int
    time: int = Field(description="Travel time in seconds")
    distance: float = Field(description="Road distance in the requested unit")
    date_time: str | None = None


class MatrixResponse(BaseModel):
    sources_to_targets: list[list[MatrixCell | None]]
    sources: list[LatLon]
    targets: list[LatLon]
    units: Units
    id: str | None = None


def departure(req):
    """(costing options without date_time, departure datetime or None, date_time type or None). The spec puts the departure
    time in costing_options (flat or under the costing key); a top-level `date_time` is accepted too."""
    from geoengine.services.route_options import parse_date_time

    raw = req.costing_options
    dt, where = getattr(req, "date_time", None), "date_time"
    if isinstance(raw, dict):
        raw = dict(raw)
        if "date_time" in raw:
            dt, where = raw.pop("date_time"), "costing_options.date_time"
        nested = raw.get(req.costing)
        if isinstance(nested, dict) and "date_time" in nested:
            nested = dict(nested)
            dt, where = nested.pop("date_time"), f"costing_options.{req.costing}.date_time"
            raw[req.costing] = nested
    if dt is None:
        return raw, None, None
    kind, when = parse_date_time(dt, field=where)
    if kind == 2:
        raise InvalidRequest.field(f"{where}.type", "/matrix takes a departure time (type 0, 1 or 3), not arrive_by (2)")
    return raw, when, kind


def compute(router, req: MatrixRequest):
    """(MatrixResult arrays, departure datetime or None) of a validated request."""
    src = np.array([[loc.lon, loc.lat] for loc in req.sources], dtype=np.float64)
    dst = np.array([[loc.lon, loc.lat] for loc in req.targets], dtype=np.float64)
    options, depart, kind = departure(req)
    from geoengine.traffic.timeofday import Selection, bucket_of

    # the departure's quarter hour selects the metric (time-of-day profiles, docs/traffic.md)
    sel = None if depart is None else Selection(bucket_of(depart), kind == 0, depart, kind)
    res = router.matrix(src, dst, req.costing, options, source_radius=radii(req.sources),
                        target_radius=radii(req.targets), source_locations=req.sources,
                        target_locations=req.targets, bucket=sel)
    return res, depart


def matrix_document(router, req: MatrixRequest) -> dict:
    """The /matrix document: null cells where no route, integer seconds, distances in the request's units."""
    res, depart = compute(router, req)
    scale = metres_per_unit(req.units)
    ok = np.isfinite(res.time_s)
    times = np.rint(np.where(ok, res.time_s, 0.0)).astype(np.int64).tolist()
    dists = np.round(np.where(ok, res.distance_m, 0.0) / scale, 3).tolist()
    ok = ok.tolist()
    cols = range(len(req.targets))
    rows = [[{"from_index": i, "to_index": j, "time": t, "distance": d} if o else None
             for j, t, d, o in zip(cols, t_row, d_row, ok_row, strict=True)]
            for i, (t_row, d_row, ok_row) in enumerate(zip(times, dists, ok, strict=True))]
    if depart is not None:  # estimated arrival per cell
        for t_row, row in zip(times, rows, strict=True):
            for j, cell in enumerate(row):
                if cell is not None:
                    cell["date_time"] = (depart + timedelta(seconds=t_row[j])).strftime("%Y-%m-%dT%H:%M")
    return {
        "sources_to_targets": rows,
        "sources": [{"lat": round(float(la), 6), "lon": round(float(lo), 6)} for lo, la in res.sources],
        "targets": [{"lat": round(float(la), 6), "lon": round(float(lo), 6)} for lo, la in res.targets],
        "units": req.units,
        **({"id": req.id} if req.id is not None else {}),
    }
