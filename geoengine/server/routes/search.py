"""GET /search, GET /search/reverse, GET /search/detail/{doc_id}: parse, one engine call, format.

Their entries are in server/endpoints.py. Plainly valid /search and /search/reverse requests are
answered by the fast dispatch (`plain_search`, `plain_reverse`); anything else reaches the FastAPI
routes, whose validation (`search_params`, `reverse_params`) gives the 400 problem bodies.
"""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import parse_qsl

from fastapi import Path, Query
from pydantic import BaseModel, BeforeValidator, Field, create_model

from geoengine.server.framing import PROBLEM_JSON


def _digits(v):
    """A query integer is written in digits (an optional leading +): `size=2.0` or `size= 2` is
    refused, not read as 2."""
    if isinstance(v, str) and not re.fullmatch(r"\+?[0-9]{1,9}", v):
        raise ValueError(f"'{v}' is not a whole number written in digits")
    return v


WholeNumber = Annotated[int, BeforeValidator(_digits)]

PROBLEM = {"description": "Problem details (RFC 9457)", "content": {PROBLEM_JSON: {}}}


class Location(BaseModel):
    lat: float
    lon: float


# SearchResult's nullable fields, one a line: name, type, description
_NULLABLE = """
score float Search relevance score (null on detail)
index str Source index: places, pois, streets or addresses
doc_type str place or poi
display_name str Name, then locality, region and country
name str Primary name
name_en str English name when available
place_class str Place classification (town, street, address, amenity, ...)
category str POI category (restaurant, peak, ...) or GeoNames feature code
importance float Ranking importance, 0 to 1
location Location Centroid (lat, lon)
canonical_id str Id of the document that stands for this place across sources
source str Data provider: osm or geonames
"""
_TYPES_OF = {"float": float, "str": str, "Location": Location}
SearchResult = create_model(
    "SearchResult",
    id=(str, Field(description="Document id, e.g. `osm:node:58957648` or `geonames:3041563`")),
    **{k: (_TYPES_OF[t] | None, Field(description=d))
       for k, t, d in (line.split(" ", 2) for line in _NULLABLE.strip().splitlines())},
    address=(dict[str, str] | None, Field(
        default=None, description="Nominatim's address object: house_number, road, neighbourhood, suburb, "
        "village/town/city, municipality, county, state, postcode, country, country_code (from the boundaries "
        "around it)")))


class CategoryInfo(BaseModel):
    id: str = Field(description="Category id: the iD preset id, e.g. `amenity/pharmacy`")
    tags: dict[str, str] = Field(description="OSM tags of the category")
    names: dict[str, str] = Field(description="Category name per language (en, fr, de, es, ar, hi, ca) where translated")


class PlaceDetail(SearchResult):
    names: dict[str, str | list[str]] = Field(description="Every name: name, name:xx, alt_name, ... (GeoNames: name, alternate)")
    categories: list[CategoryInfo] = Field(description="Search categories of a POI (empty for other documents)")
    address: dict[str, str] = Field(description="Address parts (addr:* without the prefix; street of an unnamed POI; country_code)")
    osm: dict | None = Field(description="OSM object: {type, id}; a street: {type: way, ids}; null for GeoNames")
    tags: dict[str, str | int] = Field(description="Useful OSM tags: opening_hours, phone, website, wheelchair, cuisine, ...")
    geometry: dict = Field(description="GeoJSON geometry: Point, or a street's MultiLineString")
    merged: list[SearchResult] = Field(description="Every document merged under the canonical id (canonical first)")


class ReverseResult(SearchResult):
    distance_m: float = Field(description="Distance in metres from the query point (to a street's geometry)")


class SearchResponse(BaseModel):
    query: str
    total: int = Field(description="Number of distinct (canonical) matches")
    took_ms: int
    results: list[SearchResult]


class ReverseResponse(BaseModel):
    lat: float
    lon: float
    took_ms: int
    results: list[ReverseResult]


ERRORS = {400: PROBLEM, 502: PROBLEM, 503: PROBLEM}
CATEGORIES_DOC = ("Only POIs of these categories, comma-separated: iD preset ids (amenity/pharmacy), tags "
                  "(amenity=pharmacy) or category words in en, fr, de, es, ar, hi or ca (pharmacy, Apotheke)")
# The engine returns plain dicts with exactly these fields (tests check them); the routes send them as
# they are instead of re-validating every result through pydantic, and declare the models for OpenAPI.
# They run on the event loop: the engine calls take well under a millisecond of CPU under the GIL, so a
# thread-pool hop would cost more than it could overlap.
DETAIL_DOC = {"summary": "One document by id or canonical id, with its full details",
              "responses": {404: PROBLEM, 502: PROBLEM, 503: PROBLEM}}
_TYPES = "Comma-separated document types: place, poi"


def search_params(
    q: str = Query(..., min_length=2, description="Search text, at least 2 characters; the last word is a prefix"),
    types: str | None = Query(None, description=_TYPES),
    lat: float | None = Query(None, ge=-90, le=90, description="Latitude to bias results towards (with lon)"),
    lon: float | None = Query(None, ge=-180, le=180, description="Longitude to bias results towards (with lat)"),
    size: Annotated[WholeNumber, Query(ge=1, le=25, description="Number of results, 1 to 25")] = 10,
    categories: str | None = Query(None, description=CATEGORIES_DOC),
    bbox: str | None = Query(None, description="Only documents inside min_lon,min_lat,max_lon,max_lat (degrees)"),
    countries: str | None = Query(None, description="Only documents of these countries: comma-separated ISO 3166-1 alpha-2 codes (ad,li)"),
) -> dict:
    return {"q": q, "types": types, "lat": lat, "lon": lon, "size": size, "categories": categories, "bbox": bbox,
            "countries": countries}


def reverse_params(
    lat: float = Query(..., ge=-90, le=90, description="Latitude"),
    lon: float = Query(..., ge=-180, le=180, description="Longitude"),
    size: Annotated[WholeNumber, Query(ge=1, le=10, description="Number of results, 1 to 10")] = 5,
    types: str | None = Query(None, description=_TYPES),
    radius: str = Query("2km", pattern=r"^\d+(\.\d+)?(m|km)$",
                        description="Search radius: a number followed by m or km (500m, 2km), at most 100km"),
    categories: str | None = Query(None, description=CATEGORIES_DOC),
) -> dict:
    return {"lat": lat, "lon": lon, "radius": radius, "size": size, "types": types, "categories": categories}


def detail_param(doc_id: str = Path(..., description="A document id or canonical id returned by search")) -> str:
    return doc_id


def search(engine, kw: dict) -> dict:
    return engine.search(**kw)


def reverse(engine, kw: dict) -> dict:
    return engine.reverse(**kw)


# ------------------------------------------------------------------------------------------ fast path
# Measured on Liechtenstein (docs/search.md): FastAPI's dependency solving, parameter validation and the
# thread-pool hop of a sync handler cost more than the search itself (~0.4 ms). The engine calls are
# sub-millisecond CPU work under the GIL, so a thread brings no parallelism, only the hop.
_NUMBER = re.compile(r"-?\d{1,3}(\.\d{1,15})?")
_INT = re.compile(r"\d{1,2}")


def plain_query(query: bytes) -> dict[str, str] | None:
    """The query parameters, or None when one repeats (the FastAPI route decides what that means)."""
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    params = dict(pairs)
    return params if len(params) == len(pairs) else None


def number(params: dict, name: str, lo: float, hi: float) -> float | None | bool:
    """A plain decimal within [lo, hi]; None when absent; False when the FastAPI route must judge it."""
    v = params.get(name)
    if v is None:
        return None
    if not _NUMBER.fullmatch(v):
        return False
    x = float(v)
    return x if lo <= x <= hi else False


def _size(params: dict, default: int, hi: int) -> int | bool:
    v = params.get("size")
    if v is None:
        return default
    return int(v) if _INT.fullmatch(v) and 1 <= int(v) <= hi else False


def plain_search(params: dict) -> dict | None:
    """search_params of a plainly valid /search, or None (the FastAPI route judges it)."""
    if "format" in params:  # Nominatim's dialect (routes/nominatim.py), never the spec's answer
        return None
    q = params.get("q")
    lat, lon = number(params, "lat", -90, 90), number(params, "lon", -180, 180)
    size = _size(params, 10, 25)
    if q is None or len(q) < 2 or lat is False or lon is False or size is False:
        return None
    return {"q": q, "types": params.get("types"), "lat": lat, "lon": lon, "size": size,
            "categories": params.get("categories"), "bbox": params.get("bbox"), "countries": params.get("countries")}


def plain_reverse(params: dict) -> dict | None:
    lat, lon = number(params, "lat", -90, 90), number(params, "lon", -180, 180)
    size = _size(params, 5, 10)
    if lat is None or lon is None or lat is False or lon is False or size is False:
        return None
    return {"lat": lat, "lon": lon, "radius": params.get("radius", "2km"), "size": size, "types": params.get("types"),
            "categories": params.get("categories")}
