"""The plain-route kernel (routing/plainroute.py, `Router.plain_route`) against the general path, on the
real session bundles: every answer it gives is the general path's document byte for byte (costings,
shape formats, units, directions, location fields, custom options), it declines exactly the cases the
general path must answer (nothing in reach, both locations on one edge, hints), and threads get their
own workspaces."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import orjson
import pytest

from geoengine.errors import GeoengineError
from geoengine.routing.router import Router
from tests.services.test_route import random_points

REGIONS = ["andorra", "liechtenstein"]
COSTINGS = ["auto", "pedestrian", "bicycle", "truck", "motorcycle", "bus", "taxi", "motor_scooter", "auto_shorter"]


@pytest.fixture(scope="module", params=REGIONS)
def engine(request):
    return request.getfixturevalue(request.param)


class Counting:
    """Router.plain_route wrapped: how many calls it answered and declined."""

    def __init__(self, monkeypatch):
        self.answered = self.declined = 0
        real = Router.plain_route

        def plain_route(router, *args, **kwargs):
            got = real(router, *args, **kwargs)
            if got is None:
                self.declined += 1
            else:
                self.answered += 1
            return got

        monkeypatch.setattr(Router, "plain_route", plain_route)


def answer(engine, req):
    """The /route document's JSON bytes, or the error's problem document."""
    try:
        return orjson.dumps(engine.route(req), option=orjson.OPT_SERIALIZE_NUMPY)
    except GeoengineError as exc:
        return ("error", exc.status, orjson.dumps(exc.to_problem()))


def general(engine, req, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(Router, "plain_route", lambda router, *a, **k: None)
        return answer(engine, req)


def perfect(engine, costing="auto", options=None):
    """The costing's profile once its perfect customisation (with the elimination tree) is in place."""
    prof = engine.router.profile(costing, None if options is None else engine.router.parse_options(costing, options))
    cust = engine.router.customiser
    if cust is not None:
        assert cust.wait(300)
    return prof


def requests(engine, n, seed, costing="auto"):
    """Varied plain two-location requests between real road positions."""
    usable = perfect(engine, costing).usable
    pts = random_points(engine.graph, usable, 2 * n, seed, jitter_m=25.0)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        locs = [{"lon": float(pts[2 * i, 0]), "lat": float(pts[2 * i, 1])},
                {"lon": float(pts[2 * i + 1, 0]), "lat": float(pts[2 * i + 1, 1])}]
        if i % 5 == 1:
            locs[0]["search_radius"] = int(rng.integers(5, 100))
        if i % 7 == 2:
            locs[1].update(name="Stop", city="Town", waiting_secs=120)
        if i % 6 == 3:
            locs[0]["type"], locs[1]["type"] = "through", "via"
        req = {"locations": locs, "costing": costing,
               "shape_format": ("polyline6", "polyline5", "geojson")[i % 3],
               "directions_options": {"directions_type": ("none", "maneuvers", "instructions")[i % 3 if i % 4 else 0],
                                      "units": ("kilometers", "miles")[i % 2],
                                      "language": ("en-US", "de-DE", "fr-FR")[i % 3]}}
        if i % 4 == 0:
            req["id"] = f"trip-{i}"
        out.append(req)
    return out


@pytest.mark.parametrize("costing", COSTINGS)
def test_plain_answers_are_the_general_documents(engine, costing, monkeypatch):
    counter = Counting(monkeypatch)
    reqs = requests(engine, 40, 17, costing)
    for req in reqs:
        got = answer(engine, req)
        assert got == general(engine, req, monkeypatch), req
    # the general path declines only for the rare pair on one edge, nothing in reach or no path
    assert counter.answered >= 0.75 * len(reqs), (counter.answered, counter.declined)


def test_custom_options_take_the_plain_path_once_perfect(engine, monkeypatch):
    """A profile of custom options is customised in the background; once its elimination tree is there,
    the plain path answers, with the general path's documents."""
    opts = {"use_highways": 0.1, "use_tolls": 0.5}
    perfect(engine, "auto", opts)
    counter = Counting(monkeypatch)
    for req in requests(engine, 20, 23):
        req["costing_options"] = opts
        assert answer(engine, req) == general(engine, req, monkeypatch)
    assert counter.answered >= 15


def test_declines_what_the_general_path_answers(engine, monkeypatch):
    g = engine.graph
    prof = engine.router.profile("auto")
    seg = int(np.flatnonzero(prof.usable[0::2] & prof.usable[1::2])[0])
    so = np.asarray(g.shape_offsets)
    a, b = int(so[seg]), int(so[seg + 1])
    lon, lat = np.asarray(g.shape_lon), np.asarray(g.shape_lat)
    # both locations on one two-way edge: the trivial path along it (Router.shortest)
    p = [(lon[a] * 0.7 + lon[b - 1] * 0.3, lat[a] * 0.7 + lat[b - 1] * 0.3),
         (lon[a] * 0.3 + lon[b - 1] * 0.7, lat[a] * 0.3 + lat[b - 1] * 0.7)]
    same_edge = {"locations": [{"lon": float(x), "lat": float(y)} for x, y in p], "directions_options": {"directions_type": "none"}}
    # nothing in reach: the 422 naming the location
    far = {"locations": [{"lon": float(lon[a]), "lat": float(lat[a])}, {"lon": 0.0, "lat": 0.0}]}
    # a heading hint: the general snapper
    hinted = {"locations": [{"lon": float(lon[a]), "lat": float(lat[a]), "heading": 90},
                            {"lon": float(lon[b - 1]), "lat": float(lat[b - 1])}]}
    counter = Counting(monkeypatch)
    for req in (same_edge, far, hinted):
        assert answer(engine, req) == general(engine, req, monkeypatch)
    assert counter.answered == 0
    assert isinstance(answer(engine, far), tuple) and answer(engine, far)[1] == 422


def test_plain_piece_is_the_general_piece(engine):
    """The kernel's candidates and piece are the general search's, number for number."""
    router = engine.router
    prof = perfect(engine)
    from geoengine.services.models import Location

    pts = random_points(engine.graph, prof.usable, 60, 5)
    taken = 0
    for i in range(0, 60, 2):
        locs = [Location(lon=float(pts[i, 0]), lat=float(pts[i, 1])), Location(lon=float(pts[i + 1, 0]), lat=float(pts[i + 1, 1]))]
        got = router.plain_route(prof, locs, 6)
        if got is None:
            continue
        taken += 1
        cands, (leg,) = got
        want = [router.plain_candidates(prof, loc, k) for k, loc in enumerate(locs)]
        for c, w in zip(cands, want, strict=True):
            for key in ("edge", "fraction", "lon", "lat", "distance"):
                np.testing.assert_array_equal(c[key], w[key])
        ref = router.shortest(prof, want[0], want[1])
        np.testing.assert_array_equal(leg.edges, ref.edges)
        assert (leg.f_first, leg.f_last, leg.cost, leg.time_s, leg.length_m, leg.src_index, leg.dst_index) == \
            (ref.f_first, ref.f_last, ref.cost, ref.time_s, ref.length_m, ref.src_index, ref.dst_index)
    assert taken >= 25


def test_threads_get_their_own_workspaces(engine):
    reqs = [r for r in requests(engine, 48, 31) if r["directions_options"]["directions_type"] == "none"]
    want = [answer(engine, r) for r in reqs]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            assert list(pool.map(lambda r: answer(engine, r), reqs)) == want
