"""The routing oracle both traffic test modules use: the same profile searched by exact Dijkstra
(its hierarchy taken away) against its customised hierarchy."""

from __future__ import annotations

import copy

import pytest

from geoengine.services.models import Location


def exact(prof):
    """`prof` without its hierarchy: the router searches it with exact Dijkstra on the same weights."""
    plain = copy.copy(prof)
    plain.ch = None
    return plain


def routes_equal_exact(router, prof, pts, *, times: bool = False) -> int:
    """Route consecutive pairs of `pts` (lon, lat rows) on `prof` and on `exact(prof)`: both find a route
    or neither, with equal costs (and times when `times`). Returns how many pairs had a route."""
    plain = exact(prof)
    found = 0
    for a, b in zip(pts[0::2], pts[1::2], strict=True):
        la, lb = Location(lon=float(a[0]), lat=float(a[1])), Location(lon=float(b[0]), lat=float(b[1]))
        c0, c1 = router.candidates(prof, la, 0), router.candidates(prof, lb, 1)
        x, y = router.shortest(prof, c0, c1), router.shortest(plain, c0, c1)
        assert (x is None) == (y is None)
        if x is not None:
            found += 1
            assert x.cost == pytest.approx(y.cost, rel=1e-9, abs=1e-6)
            if times:
                assert x.time_s == pytest.approx(y.time_s, rel=1e-6, abs=0.2)
    return found
