"""GET /search, GET /search/reverse, GET /search/detail/{doc_id}: parse, one engine call, format.

Their entries are in server/endpoints.py. The query parameters of /search, /search/reverse and GET
/elevation are declared once (`Param`: name, type, bounds, default, description): the FastAPI parse step
(`fastapi_step`: FastAPI validates and documents it, its refusals are the 400 problem bodies) and the fast
one (`plain_step`: plainly valid values only, anything else for the FastAPI route to judge) are both made
from the declaration.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
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
REQUIRED = ...


@dataclass(frozen=True)
class Param:
    """One query parameter: str, float or int (a whole number written in digits), its bounds and default
    (REQUIRED: none), its description and further FastAPI rules (`min_length` is also the fast step's)."""

    name: str
    kind: type = str
    default: object = None
    lo: float | None = None
    hi: float | None = None
    doc: str = ""
    rules: dict = field(default_factory=dict)


def fastapi_step(params: tuple[Param, ...]):
    """The FastAPI parse step of `params`: their values by name."""
    def step(**values) -> dict:
        return values

    def annotation(p: Param):
        kind = WholeNumber if p.kind is int else p.kind
        return Annotated[kind if p.default is not None else kind | None,
                         Query(ge=p.lo, le=p.hi, description=p.doc, **p.rules)]

    step.__signature__ = inspect.Signature([inspect.Parameter(
        p.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation(p),
        default=inspect.Parameter.empty if p.default is REQUIRED else p.default) for p in params])
    return step


# Measured on Liechtenstein (docs/search.md): FastAPI's dependency solving, parameter validation and the
# thread-pool hop of a sync handler cost more than the search itself (~0.4 ms). The engine calls are
# sub-millisecond CPU work under the GIL, so a thread brings no parallelism, only the hop.
_PLAIN = {float: re.compile(r"-?\d{1,3}(\.\d{1,15})?"), int: re.compile(r"\d{1,2}")}


def plain_step(params: tuple[Param, ...]):
    """The fast parse step of `params`: their values by name when each is plainly valid (present when
    required, a plain decimal within its bounds, a string of its `min_length`), else None."""
    def step(query: dict) -> dict | None:
        out = {}
        for p in params:
            v = query.get(p.name)
            if v is None:
                if p.default is REQUIRED:
                    return None
                v = p.default
            elif p.kind is str:
                if len(v) < p.rules.get("min_length", 0):
                    return None
            elif _PLAIN[p.kind].fullmatch(v) is None or not p.lo <= (v := p.kind(v)) <= p.hi:
                return None
            out[p.name] = v
        return out

    return step


def plain_query(query: bytes) -> dict[str, str] | None:
    """The query parameters, or None when one repeats (the FastAPI route decides what that means)."""
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    params = dict(pairs)
    return params if len(params) == len(pairs) else None


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


_LAT = {"lo": -90, "hi": 90}
_LON = {"lo": -180, "hi": 180}
SEARCH = (
    Param("q", default=REQUIRED, doc="Search text, at least 2 characters; the last word is a prefix",
          rules={"min_length": 2}),
    Param("types", doc=_TYPES),
    Param("lat", float, **_LAT, doc="Latitude to bias results towards (with lon)"),
    Param("lon", float, **_LON, doc="Longitude to bias results towards (with lat)"),
    Param("size", int, 10, 1, 25, "Number of results, 1 to 25"),
    Param("categories", doc=CATEGORIES_DOC),
    Param("bbox", doc="Only documents inside min_lon,min_lat,max_lon,max_lat (degrees)"),
    Param("countries",
          doc="Only documents of these countries: comma-separated ISO 3166-1 alpha-2 codes (ad,li)"),
)
REVERSE = (
    Param("lat", float, REQUIRED, **_LAT, doc="Latitude"),
    Param("lon", float, REQUIRED, **_LON, doc="Longitude"),
    Param("size", int, 5, 1, 10, "Number of results, 1 to 10"),
    Param("types", doc=_TYPES),
    Param("radius", default="2km", rules={"pattern": r"^\d+(\.\d+)?(m|km)$"},
          doc="Search radius: a number followed by m or km (500m, 2km), at most 100km"),
    Param("categories", doc=CATEGORIES_DOC),
)
search_params, reverse_params = fastapi_step(SEARCH), fastapi_step(REVERSE)
# a /search with Nominatim's `format` never reaches plain_search: the dialect's entry comes first in the
# table and takes it (server/endpoints.py)
plain_search, plain_reverse = plain_step(SEARCH), plain_step(REVERSE)


def detail_param(doc_id: str = Path(..., description="A document id or canonical id returned by search")) -> str:
    return doc_id
