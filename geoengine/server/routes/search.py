"""GET /search, GET /search/reverse, GET /search/detail/{doc_id}: parse, one engine call, format."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from geoengine.engine import Engine
from geoengine.server.deps import get_engine

router = APIRouter(tags=["Search"])

PROBLEM = {"description": "Problem details (RFC 9457)", "content": {"application/problem+json": {}}}


class Location(BaseModel):
    lat: float
    lon: float


class SearchResult(BaseModel):
    id: str = Field(description="Document id, e.g. `osm:node:58957648` or `geonames:3041563`")
    score: float | None = Field(description="Search relevance score (null on detail)")
    index: str | None = Field(description="Source index: places, pois, streets or addresses")
    doc_type: str | None = Field(description="place or poi")
    display_name: str | None = Field(description="Name, then locality, region and country")
    name: str | None = Field(description="Primary name")
    name_en: str | None = Field(description="English name when available")
    place_class: str | None = Field(description="Place classification (town, street, address, amenity, ...)")
    category: str | None = Field(description="POI category (restaurant, peak, ...) or GeoNames feature code")
    importance: float | None = Field(description="Ranking importance, 0 to 1")
    location: Location | None = Field(description="Centroid (lat, lon)")
    canonical_id: str | None = Field(description="Id of the document that stands for this place across sources")
    source: str | None = Field(description="Data provider: osm or geonames")


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
# The engine returns plain dicts with exactly these fields (tests check them); the routes send them as
# they are instead of re-validating every result through pydantic, and declare the models for OpenAPI.


@router.get("/search", response_model=None, responses={200: {"model": SearchResponse}, **ERRORS}, summary="Autocomplete search of places and POIs")
def search(
    q: str = Query(..., min_length=2, description="Search text, at least 2 characters; the last word is a prefix"),
    types: str | None = Query(None, description="Comma-separated document types: place, poi"),
    lat: float | None = Query(None, ge=-90, le=90, description="Latitude to bias results towards (with lon)"),
    lon: float | None = Query(None, ge=-180, le=180, description="Longitude to bias results towards (with lat)"),
    size: int = Query(10, ge=1, le=25, description="Number of results, 1 to 25"),
    engine: Engine = Depends(get_engine),
) -> JSONResponse:
    return JSONResponse(engine.search(q, types=types, lat=lat, lon=lon, size=size))


@router.get("/search/reverse", response_model=None, responses={200: {"model": ReverseResponse}, **ERRORS},
            summary="Nearest places and POIs to a coordinate")
def reverse(
    lat: float = Query(..., ge=-90, le=90, description="Latitude"),
    lon: float = Query(..., ge=-180, le=180, description="Longitude"),
    size: int = Query(5, ge=1, le=10, description="Number of results, 1 to 10"),
    types: str | None = Query(None, description="Comma-separated document types: place, poi"),
    radius: str = Query("2km", pattern=r"^\d+(\.\d+)?(m|km)$",
                        description="Search radius: a number followed by m or km (500m, 2km), at most 100km"),
    engine: Engine = Depends(get_engine),
) -> JSONResponse:
    return JSONResponse(engine.reverse(lat, lon, radius=radius, size=size, types=types))


@router.get("/search/detail/{doc_id}", response_model=None,
            responses={200: {"model": SearchResult}, 404: PROBLEM, 502: PROBLEM, 503: PROBLEM},
            summary="One document by id or canonical id")
def detail(doc_id: str = Path(..., description="A document id or canonical id returned by search"),
           engine: Engine = Depends(get_engine)) -> JSONResponse:
    return JSONResponse(engine.place(doc_id))
