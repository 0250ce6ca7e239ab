"""Piece geometry on Andorra: the shape of a leg made of several pieces (through / via locations) and
the shape index range of each traversed edge, which maneuvers and OSRM step geometries cut from."""

from __future__ import annotations

import numpy as np

from geoengine.routing.pieces import piece_geometry, pieces_geometry
from geoengine.services import route as R
from geoengine.validation import validate


def _locations(engine, n_routes, k, seed):
    g = engine.graph
    prof = engine.router.profile("auto")
    nodes = np.unique(np.asarray(g.edge_src)[prof.usable])
    rng = np.random.default_rng(seed)
    pick = nodes[rng.choice(len(nodes), n_routes * k, replace=False)]
    pts = np.column_stack([np.asarray(g.node_lon)[pick], np.asarray(g.node_lat)[pick]])
    return [[{"lon": float(x), "lat": float(y), "type": "through" if 0 < j < k - 1 else "break"}
             for j, (x, y) in enumerate(pts[i * k:(i + 1) * k])] for i in range(n_routes)]


def test_multi_piece_shape_indices_cover_the_shape_edge_by_edge(andorra):
    g = andorra.graph
    checked = 0
    for locs in _locations(andorra, 40, 3, seed=11):
        req = validate(R.RouteRequest, None, locations=locs)
        try:
            s = andorra.router.search(req.costing, req.costing_options, req.locations)
        except Exception:  # NoRoute / Unsnappable for some random points: not what this test is about
            continue
        lon, lat, begin, end, edges, covered = pieces_geometry(g, s.pieces)
        assert len(s.pieces) == 2 and len(edges) == sum(len(p.edges) for p in s.pieces)
        # the edges' ranges tile the whole shape in order: first at 0, each ends where the next begins,
        # the last at the final point
        assert begin[0] == 0 and end[-1] == len(lon) - 1
        assert np.array_equal(end[:-1], begin[1:]) and (end >= begin).all()
        # every wholly travelled edge starts at its tail node and ends at its head node
        whole = np.flatnonzero(covered >= 1.0)
        src, dst = np.asarray(g.edge_src)[edges[whole]], np.asarray(g.edge_dst)[edges[whole]]
        np.testing.assert_allclose(lon[begin[whole]], np.asarray(g.node_lon)[src], atol=1e-9)
        np.testing.assert_allclose(lat[end[whole]], np.asarray(g.node_lat)[dst], atol=1e-9)
        # the joined shape is the pieces' shapes without the repeated point where they meet
        first = piece_geometry(g, s.pieces[0])
        second = piece_geometry(g, s.pieces[1])
        np.testing.assert_array_equal(lon, np.concatenate([first[0], second[0][1:]]))
        checked += 1
    assert checked >= 10
