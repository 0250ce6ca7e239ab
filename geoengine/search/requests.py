"""Parsing the search and reverse requests' arguments (sizes, points, radius, types, bbox, countries) into
checked values, raising InvalidRequest naming the field; used by `index.SearchIndex` and the geocoder."""

from __future__ import annotations

import math
import re

import numpy as np

from geoengine.errors import FieldError, InvalidRequest
from geoengine.search.write import TYPES, country_code_int

MAX_RADIUS_M = 100_000.0
RADIUS_RE = re.compile(r"^(\d+(?:\.\d+)?)(m|km)$")


def parse_radius(radius) -> float:
    """'500m' / '2km' (or a number of metres) -> metres; anything else raises InvalidRequest."""
    if isinstance(radius, (int, float)) and not isinstance(radius, bool):
        metres = float(radius)
    else:
        m = RADIUS_RE.match(str(radius))
        if not m:
            raise InvalidRequest.field("radius", f"'{radius}' is not a distance like 500m or 2km")
        metres = float(m.group(1)) * (1000.0 if m.group(2) == "km" else 1.0)
    if not (0 < metres <= MAX_RADIUS_M):
        raise InvalidRequest.field("radius", f"radius must be above 0 and at most {MAX_RADIUS_M / 1000:g}km")
    return metres


def parse_types(types) -> list[int] | None:
    """None, "" or [] mean every type; otherwise a comma-separated string or a list of place, poi."""
    if types is None or (isinstance(types, str) and not types.strip()):
        return None
    vals = [t.strip() for t in types.split(",")] if isinstance(types, str) else [str(t).strip() for t in types]
    vals = [v for v in vals if v]
    bad = [v for v in vals if v not in TYPES]
    if bad or not vals:
        raise InvalidRequest.field("types", f"types must be a comma-separated list of {', '.join(TYPES)}; got '{types}'")
    return [TYPES[v] for v in vals]


def _check_point(lat, lon, *, required: bool) -> tuple[float, float] | None:
    errors = []
    if lat is None and lon is None:
        if required:
            errors = [FieldError("lat", "lat is required"), FieldError("lon", "lon is required")]
            raise InvalidRequest(errors=errors)
        return None
    if lat is None or lon is None:
        missing = "lat" if lat is None else "lon"
        raise InvalidRequest.field(missing, "lat and lon must be given together")
    try:
        lat, lon = float(lat), float(lon)
    except (TypeError, ValueError):
        raise InvalidRequest(errors=[FieldError("lat", "must be a number"), FieldError("lon", "must be a number")]) from None
    if not (-90.0 <= lat <= 90.0) or math.isnan(lat):
        errors.append(FieldError("lat", "latitude must be between -90 and 90"))
    if not (-180.0 <= lon <= 180.0) or math.isnan(lon):
        errors.append(FieldError("lon", "longitude must be between -180 and 180"))
    if errors:
        raise InvalidRequest(errors=errors)
    return lat, lon


def _check_size(size, lo: int, hi: int) -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or not (lo <= size <= hi):
        raise InvalidRequest.field("size", f"size must be an integer from {lo} to {hi}")
    return int(size)


def four_numbers(value) -> list[float] | None:
    """The four finite numbers of 'a,b,c,d' or a 4-sequence (a bbox, a viewbox); None when it is not that."""
    try:
        vals = [float(v) for v in (value.split(",") if isinstance(value, str) else value)]
    except (TypeError, ValueError):
        return None
    return vals if len(vals) == 4 and all(math.isfinite(v) for v in vals) else None


def parse_bbox(bbox) -> tuple[float, float, float, float] | None:
    """'minlon,minlat,maxlon,maxlat' (or a 4-sequence) -> tuple; None when not given; else InvalidRequest."""
    if bbox is None or (isinstance(bbox, str) and not bbox.strip()):
        return None
    vals = four_numbers(bbox)
    if vals is None:
        raise InvalidRequest.field("bbox", "bbox must be four numbers: min_lon,min_lat,max_lon,max_lat")
    x0, y0, x1, y1 = vals
    if not (-180 <= x0 <= x1 <= 180 and -90 <= y0 <= y1 <= 90):
        raise InvalidRequest.field("bbox", "bbox must be min_lon,min_lat,max_lon,max_lat with -180 <= min_lon <= max_lon "
                                           "<= 180 and -90 <= min_lat <= max_lat <= 90")
    return x0, y0, x1, y1


def parse_countries(countries) -> np.ndarray | None:
    """'ad,li' (or a list) of ISO 3166-1 alpha-2 codes -> their uint16 codes; None when not given."""
    if countries is None or (isinstance(countries, str) and not countries.strip()):
        return None
    vals = [c.strip() for c in countries.split(",")] if isinstance(countries, str) else [str(c).strip() for c in countries]
    vals = [v for v in vals if v]
    codes = [country_code_int(v) for v in vals]
    if not vals or len(vals) > 50 or 0 in codes:
        raise InvalidRequest.field("countries", "countries must be comma-separated ISO 3166-1 alpha-2 codes such as ad,li")
    return np.asarray(codes, np.uint16)
