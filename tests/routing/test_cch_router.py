"""The router on the bundle's CCH: non-default options and avoid areas get a customised hierarchy whose
answers equal the exact Dijkstra search on the same profile (route legs, matrix, batch); the option
cache stays within its byte budget while 100 distinct option sets are requested from 4 threads, and
the HTTP server answers throughout."""

from __future__ import annotations

import copy
import dataclasses
import threading

import numpy as np
import pytest

import geoengine
from geoengine.costing import parse_costing_options
from geoengine.errors import NoRoute
from geoengine.routing.cch import CustomisedCH
from geoengine.routing.customise import profile_nbytes
from geoengine.routing.router import Router, _flat, _table_flat
from geoengine.services.models import AvoidLocation, Location


def random_points(graph, usable, n, seed):
    rng = np.random.default_rng(seed)
    segs = np.flatnonzero(usable[0::2] | usable[1::2])
    so = np.asarray(graph.shape_offsets)
    pick = rng.choice(segs, n)
    idx = np.minimum(so[pick] + (rng.random(n) * (so[pick + 1] - so[pick])).astype(np.int64), so[pick + 1] - 1)
    return np.column_stack([np.asarray(graph.shape_lon)[idx], np.asarray(graph.shape_lat)[idx]])


def exact(prof):
    """The same profile searched by exact Dijkstra (no hierarchy)."""
    plain = copy.copy(prof)
    plain.ch = None
    return plain


@pytest.fixture(scope="module", params=["andorra", "liechtenstein"])
def engine(request):
    return request.getfixturevalue(request.param)


OPTION_SETS = [("auto", {"use_highways": 0.0, "use_tolls": 1.0}), ("auto", {"shortest": True}),
               ("truck", {"height": 4.5, "weight": 40}), ("pedestrian", {"walking_speed": 3.0, "use_hills": 1.0}),
               ("bicycle", {"use_roads": 0.0, "bicycle_type": "Mountain"})]


@pytest.mark.parametrize("costing,options", OPTION_SETS)
def test_options_route_equals_exact_search(engine, costing, options):
    router = engine.router
    prof = router.profile(costing, parse_costing_options(costing, options))
    assert isinstance(prof.ch, CustomisedCH)
    assert router.profile(costing, parse_costing_options(costing, options)) is prof  # cached
    plain = exact(prof)
    pts = random_points(engine.graph, prof.usable, 40, seed=7)
    n = 0
    for a, b in zip(pts[0::2], pts[1::2], strict=True):
        la = [Location(lon=float(a[0]), lat=float(a[1])), Location(lon=float(b[0]), lat=float(b[1]))]
        c0, c1 = router.candidates(prof, la[0], 0), router.candidates(prof, la[1], 1)
        x, y = router.shortest(prof, c0, c1), router.shortest(plain, c0, c1)
        assert (x is None) == (y is None)
        if x is not None:
            n += 1
            assert x.cost == pytest.approx(y.cost, rel=1e-9, abs=1e-6)
            # time and length follow the path taken; among paths of equal cost (e.g. `shortest`, where
            # the cost is the length) either search may take another one
            assert np.isfinite(x.time_s) and np.isfinite(x.length_m)
    assert n >= 10


def test_options_matrix_and_batch_equal_exact(engine):
    router = engine.router
    options = {"use_highways": 0.1, "top_speed": 70}
    prof = router.profile("auto", parse_costing_options("auto", options))
    pts = random_points(engine.graph, prof.usable, 30, seed=9)
    m = router.matrix(pts[:15], pts[15:], "auto", options)
    cs, sl = router._snap_many(prof, pts[:15, 0], pts[:15, 1], None, "sources")
    ct, tl = router._snap_many(prof, pts[15:, 0], pts[15:, 1], None, "targets")
    sv, so, so2, sp = _flat(prof, cs, sl, target=False)
    tv, to, to2, tp = _flat(prof, ct, tl, target=True)
    P_ch, _ = _table_flat(prof, sv, so, so2, sp, tv, to, to2, tp)
    P_ex, _ = _table_flat(exact(prof), sv, so, so2, sp, tv, to, to2, tp)
    np.testing.assert_allclose(P_ch, P_ex, rtol=1e-9, atol=1e-6)
    assert np.isfinite(m.time_s).mean() > 0.5
    t, d = router.route_many(pts[:15], pts[15:], "auto", options)
    np.testing.assert_allclose(t, np.diag(m.time_s), atol=1e-6)


def test_avoid_locations_block_arcs_in_the_hierarchy(engine):
    """An avoided point: the route (on a customised hierarchy with those edges blocked) equals the exact
    search on the same blocked profile and never uses a blocked edge."""
    router = engine.router
    prof = router.profile("auto")
    pts = random_points(engine.graph, prof.usable, 40, seed=13)
    checked = 0
    for a, b in zip(pts[0::2], pts[1::2], strict=True):
        la = [Location(lon=float(a[0]), lat=float(a[1])), Location(lon=float(b[0]), lat=float(b[1]))]
        try:
            searched = router.search("auto", None, la)
        except NoRoute:
            continue
        edges = searched.pieces[0].edges
        if len(edges) < 5:
            continue
        mid = int(edges[len(edges) // 2])
        seg = mid >> 1
        so = np.asarray(engine.graph.shape_offsets)
        k = (so[seg] + so[seg + 1] - 1) // 2  # the middle of the segment's middle piece
        lon = (float(engine.graph.shape_lon[k]) + float(engine.graph.shape_lon[k + 1])) / 2
        lat = (float(engine.graph.shape_lat[k]) + float(engine.graph.shape_lat[k + 1])) / 2
        avoid = [AvoidLocation(lon=lon, lat=lat, radius=0)]
        blocked = router._avoid_mask(avoid, None)
        if not blocked[mid]:  # another road lies on top of this one
            continue
        bprof = router.profile("auto", None, blocked)
        assert isinstance(bprof.ch, CustomisedCH) and bprof is not prof
        try:
            got = router.search("auto", None, la, avoid_locations=avoid)
        except NoRoute:
            c0 = router.candidates(bprof, la[0], 0)
            c1 = router.candidates(bprof, la[1], 1)
            assert router.shortest(exact(bprof), c0, c1) is None
            continue
        assert got.prof is bprof
        assert not blocked[got.pieces[0].edges].any()
        y = router.shortest(exact(bprof), got.cands[0], got.cands[1])
        assert got.pieces[0].cost == pytest.approx(y.cost, rel=1e-9, abs=1e-6)
        checked += 1
        if checked >= 6:
            break
    assert checked >= 3


def test_cache_stays_within_budget_under_concurrency(liechtenstein):
    """100 distinct option sets from 4 threads: the cache never holds more than its budget, every
    answer equals the exact search on the same options."""
    eng = liechtenstein
    base = eng.router.profile("auto", parse_costing_options("auto", {"top_speed": 61}))
    budget = int(3.5 * profile_nbytes(base))  # room for three profiles
    router = Router(eng.graph, eng.snapper, eng.bundle.path / "routing", cch_cache_bytes=budget)
    pts = random_points(eng.graph, base.usable, 8, seed=17)
    la = [Location(lon=float(p[0]), lat=float(p[1])) for p in pts]
    peak = [0]
    stop = threading.Event()
    errors: list = []

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], router.customiser.cache.bytes)
            stop.wait(0.001)

    def work(t):
        try:
            for i in range(25):
                speed = 30 + t * 25 + i  # 100 distinct values over the 4 threads (140, the default, is not one)
                prof = router.profile("auto", parse_costing_options("auto", {"top_speed": speed}))
                c0, c1 = router.plain_candidates(prof, la[2 * (i % 4)], 0), router.plain_candidates(prof, la[2 * (i % 4) + 1], 1)
                x = router.shortest(prof, c0, c1)
                if i % 8 == 0:
                    y = router.shortest(exact(prof), c0, c1)
                    if (x is None) != (y is None) or (x is not None and abs(x.cost - y.cost) > 1e-6):
                        errors.append((speed, x, y))
        except Exception as exc:  # reported below
            errors.append(repr(exc))

    w = threading.Thread(target=watch)
    w.start()
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    w.join()
    cache = router.customiser.cache
    assert not errors
    assert cache.misses == 100
    assert 0 < peak[0] <= budget and cache.bytes <= budget
    assert 1 <= len(cache) <= 3


def test_server_answers_while_options_are_customised(liechtenstein, api_client, settings):
    eng = geoengine.open(liechtenstein.bundle.path, settings=dataclasses.replace(settings, cch_cache_bytes=200_000_000))
    client = api_client(eng)
    base = eng.router.profile("auto")
    pts = random_points(eng.graph, base.usable, 2, seed=19)
    locs = [{"lon": float(p[0]), "lat": float(p[1])} for p in pts]
    statuses: list[int] = []
    health: list[int] = []
    done = threading.Event()

    def work(t):
        for i in range(10):
            r = client.post("/route", json={"locations": locs, "costing": "auto",
                                            "costing_options": {"auto": {"use_highways": round(0.05 * (t * 10 + i) / 2, 3)}}})
            statuses.append(r.status_code)

    def poll():
        while not done.is_set():
            health.append(client.get("/health").status_code)
            done.wait(0.02)

    p = threading.Thread(target=poll)
    p.start()
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    p.join()
    assert statuses and all(s == 200 for s in statuses), statuses
    assert health and all(s == 200 for s in health)
    assert eng.router.customiser.cache.bytes <= 200_000_000


def test_new_option_set_answers_on_the_basic_customisation_then_the_perfect_one(liechtenstein):
    """The first request of a new option set waits for the basic customisation only; the perfect one
    replaces it in the background, and both give the exact search's costs."""
    router = liechtenstein.router
    options = parse_costing_options("auto", {"use_highways": 0.25, "use_tolls": 0.75})
    prof = router.profile("auto", options)
    basic = prof.ch
    assert isinstance(basic, CustomisedCH) and basic.info["perfect"] is False and basic.parent is None
    assert router.customiser.wait(timeout=60)
    assert prof.ch is not basic and prof.ch.info["perfect"] is True and prof.ch.parent is not None
    assert prof.ch.info["up_arcs"] <= basic.info["up_arcs"]  # pruned
    plain = exact(prof)
    pts = random_points(liechtenstein.graph, prof.usable, 30, seed=11)
    n = 0
    for a, b in zip(pts[0::2], pts[1::2], strict=True):
        c0 = router.candidates(prof, Location(lon=float(a[0]), lat=float(a[1])), 0)
        c1 = router.candidates(prof, Location(lon=float(b[0]), lat=float(b[1])), 1)
        ys = router.shortest(plain, c0, c1)
        for ch in (basic, prof.ch):
            one = copy.copy(prof)
            one.ch = ch
            x = router.shortest(one, c0, c1)
            assert (x is None) == (ys is None)
            if x is not None:
                n += 1
                assert x.cost == pytest.approx(ys.cost, rel=1e-9, abs=1e-6)
    assert n >= 10


@pytest.mark.parametrize("costing,options", OPTION_SETS[:3])
def test_profile_arcs_map_to_the_supergraph_through_the_turn_base(andorra, costing, options):
    """A profile's arcs are a subset of every possible turn (`TurnBase`): their supergraph edges read
    from the base equal those the merge walk finds."""
    router = andorra.router
    prof = router.profile(costing, parse_costing_options(costing, options))
    off, tgt, _w, _s = prof.turn_csr()
    cust = router.customiser
    cust._ensure_base()
    base = cust.topology._base
    assert np.array_equal(base[1][prof.base_index], tgt)
    edge, up = cust.topology._find(np.asarray(off, np.int64), np.asarray(tgt, np.int64))
    assert np.array_equal(edge, base[2][prof.base_index]) and np.array_equal(up, base[3][prof.base_index])


@pytest.mark.parametrize("perfect", [False, True])
def test_parallel_and_serial_customisations_are_identical(andorra, perfect):
    """The parallel kernels (lower pass, perfect pass, compaction) write exactly the serial ones' arrays."""
    router = andorra.router
    prof = router.profile("truck", parse_costing_options("truck", {"height": 4.2}))
    cust = router.customiser
    a = cust.customise(prof, perfect=perfect, parallel=True)
    b = cust.customise(prof, perfect=perfect, parallel=False)
    for name in ("up_off", "up_tgt", "up_w", "up_s", "up_mid", "up_c1", "up_c2", "up_row", "up_hops",
                 "dn_off", "dn_tgt", "dn_w", "dn_s", "dn_mid", "dn_c1", "dn_c2", "dn_row", "dn_hops"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_metric_cache_counts_a_replaced_hierarchy_again():
    """MetricCache.refresh: a kept value whose size changed (the basic hierarchy replaced by the smaller
    perfect one) is counted again, and the cache evicts down to its budget when it grew."""
    from geoengine.routing.customise import MetricCache

    sizes = {}
    cache = MetricCache(100, sizeof=lambda v: sizes[v])
    sizes.update(a=60, b=30)
    assert cache.get("ka", lambda: "a") == "a" and cache.get("kb", lambda: "b") == "b"
    assert cache.bytes == 90
    sizes["a"] = 20  # replaced by something smaller
    cache.refresh("ka")
    assert cache.bytes == 50 and len(cache) == 2
    sizes["b"] = 90  # grew past the budget: the least recently used goes
    cache.refresh("kb")
    assert cache.bytes == 90 and len(cache) == 1 and cache.get("kb", lambda: "x") == "b"
    cache.refresh("missing")  # not kept: nothing happens
    assert cache.bytes == 90


def test_metric_cache_never_shows_more_than_its_budget_while_it_evicts():
    """`bytes` is read without the lock (by the concurrency test's watcher, by metrics): at every step of
    an eviction, in `get` and in `refresh`, it stays within the budget (it once counted the new value
    before evicting, and a reader between the two saw four hierarchies' bytes against a budget of 3.5)."""
    from collections import OrderedDict

    from geoengine.routing.customise import MetricCache

    seen: list[int] = []

    class Watched(OrderedDict):
        def popitem(self, last=True):
            seen.append(cache.bytes)
            return super().popitem(last=last)

        def __setitem__(self, k, v):
            seen.append(cache.bytes)
            super().__setitem__(k, v)

    sizes = dict(a=40, b=40, c=40, d=40)
    cache = MetricCache(100, sizeof=lambda v: sizes[v])
    cache._items = Watched()
    for k in "abcd":  # the third and fourth evict
        assert cache.get(k, lambda k=k: k) == k
        seen.append(cache.bytes)
    assert len(cache) == 2 and cache.bytes == 80
    sizes["d"] = 95  # grows past the budget: c goes, then d fits alone
    cache.refresh("d")
    seen.append(cache.bytes)
    assert cache.bytes == 95 and len(cache) == 1
    sizes["d"] = 120  # larger than the whole budget: d itself goes
    cache.refresh("d")
    assert cache.bytes == 0 and len(cache) == 0
    assert seen and max(seen) <= 100


def test_warm_customises_the_car_perfectly_at_once(andorra):
    """At start-up nobody waits: the car's default profile gets the perfect customisation directly."""
    router = Router(andorra.graph, andorra.router.snapper, andorra.router.ch_dir)
    router.warm()
    prof = router.profile("auto")
    assert isinstance(prof.ch, CustomisedCH) and prof.ch.info["perfect"] is True
    assert router.customiser.perfected == 0  # nothing queued for the background
