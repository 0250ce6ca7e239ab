"""POST /optimised_route: the best order in which to visit stops (first and last fixed; see
geoengine.routing.stop_order for the solver), and the trip through them in that order.

Library: `engine.optimised_route(locations=[...], costing="auto")`.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from geoengine.errors import FieldError, NoRoute, field_path
from geoengine.routing.stop_order import UNREACHABLE, path_cost, solve
from geoengine.services.models import DirectionsOptions, Location, OptimisedRouteCosting, costing_validator

MAX_OPTIMISED_STOPS = 50


class OptimisedRouteRequest(BaseModel):
    """Body of POST /optimised_route."""

    model_config = ConfigDict(extra="ignore", strict=True)

    locations: list[Location] = Field(min_length=2, max_length=MAX_OPTIMISED_STOPS,
                                      description=f"Stops, 2 to {MAX_OPTIMISED_STOPS}. The first and the last stay "
                                      "first and last; the ones between are reordered. Repeat the first location "
                                      "at the end for a round trip.")
    costing: OptimisedRouteCosting = "auto"
    costing_options: dict[str, Any] | None = Field(None, description="Options of the costing (see GET /costing/options/{costing})")
    directions_options: DirectionsOptions = Field(default_factory=DirectionsOptions)
    shape_format: Literal["polyline6", "polyline5", "geojson"] = "polyline6"
    id: str | None = Field(None, description="Echoed in the response")

    _costing_known = costing_validator("optimised_route")


class Optimisation(BaseModel):
    method: Literal["exact", "heuristic", "trivial"] = Field(
        description="exact: Held-Karp dynamic programming; heuristic: 2-opt + Or-opt iterated local search")
    time_s: float = Field(description="Matrix travel time of the chosen order, seconds")
    given_order_time_s: float = Field(description="Matrix travel time of the order given in the request, seconds")


class OptimisedRouteResponse(BaseModel):
    optimized_order: list[int] = Field(description="Indices into the request's locations, in visiting order")
    optimisation: Optimisation
    trip: dict[str, Any] = Field(description="The trip through the locations in that order: the shape of the "
                                 "POST /route trip; each location's original_index is its index in the request")
    id: str | None = None



def optimised_route(engine, req: OptimisedRouteRequest) -> dict:
    """The POST /optimised_route document."""
    from geoengine.services.documents.trip import trip_document

    order, method, cost, given, best = optimise(engine, req)
    out = {"optimized_order": order,
           "optimisation": {"method": method, "time_s": round(cost, 1), "given_order_time_s": round(given, 1)},
           "trip": trip_document(best, req.shape_format)}
    if req.id is not None:
        out["id"] = req.id
    return out


def optimise(engine, req: OptimisedRouteRequest):
    """(visiting order, method, matrix time of that order, matrix time of the given order, the typed
    Route through the stops in that order with each location's original_index set)."""
    from geoengine.services import route

    router = engine.router
    locs = req.locations
    pts = np.array([[loc.lon, loc.lat] for loc in locs], dtype=np.float64)
    radii = np.array([np.nan if loc.search_radius is None else loc.search_radius for loc in locs], dtype=np.float64)
    radii = None if np.isnan(radii).all() else radii
    res = router.matrix(pts, pts, req.costing, req.costing_options, source_radius=radii, target_radius=radii,
                        field="locations")
    T = np.array(res.time_s, dtype=np.float64)
    n = len(locs)
    np.fill_diagonal(T, 0.0)
    # every stop must be reachable from the first and reach the last, else no order can work
    first, last = field_path("locations", 0), field_path("locations", n - 1)
    for i in range(1, n):
        here = field_path("locations", i)
        if not np.isfinite(T[0, i]):
            raise NoRoute(f"{here} cannot be reached from {first} for costing '{req.costing}'",
                          errors=[FieldError(here, f"not reachable from {first}")])
        if not np.isfinite(T[i - 1 if i == n - 1 else i, n - 1]):
            raise NoRoute(f"{last} cannot be reached from {here} for costing '{req.costing}'",
                          errors=[FieldError(here, f"cannot reach {last}")])
    D = np.where(np.isfinite(T), T, UNREACHABLE)
    order, method = solve(D)
    cost = float(path_cost(D, order))
    if cost >= UNREACHABLE:
        raise NoRoute("no order of the locations can be driven: some stops cannot reach each other",
                      errors=[FieldError("locations", "no feasible visiting order")])
    # the chosen order as a /route request, all locations as stops
    body = req.model_dump()
    body["locations"] = [body["locations"][int(i)] for i in order]
    for loc in body["locations"][1:-1]:
        if loc.get("type") in ("through", "via"):
            loc["type"] = "break"
    rreq = route.RouteRequest.model_validate({k: body[k] for k in ("locations", "costing", "costing_options",
                                                                   "directions_options", "shape_format", "id")})
    best = route.run(engine, rreq).best
    for k, loc in enumerate(best.locations):
        loc.original_index = int(order[k])
    return [int(i) for i in order], method, cost, float(path_cost(D, np.arange(n))), best
