"""The turn-expanded graph: real restrictions of Liechtenstein, U-turns, and agreement with a plain loop."""

from __future__ import annotations

import numpy as np
import pytest

from geoengine.costing import edge_costs
from geoengine.graph import turn_graph
from geoengine.graph.turns import forbidden_turns, turn_angles


def _arcs(offsets, targets) -> set[tuple[int, int]]:
    src = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    return set(zip(src.tolist(), targets.tolist(), strict=True))


def _tg(g, costing):
    cost, _t, length = edge_costs(g, costing)
    return turn_graph(g, cost, length, mode=costing)


def _edges_at(g, way, node, ending: bool):
    v = g.node_of_osm(node)
    assert v is not None, f"via node {node} is not a junction"
    edges = g.edges_of_way(way)
    arr = np.asarray(g.edge_dst if ending else g.edge_src)
    return [int(e) for e in edges if arr[e] == v]


def test_real_no_turn_restriction_is_honoured(liechtenstein_graph, sample, find_restrictions):
    g = liechtenstein_graph
    rels = [r for r in find_restrictions(sample("liechtenstein/valhalla-liechtenstein-latest.osm.pbf"))
            if (r["restriction"] or "").startswith("no_") and r["via"] and r["via"][0][0] == "n"
            and g.node_of_osm(r["via"][0][1]) is not None]
    assert rels, "Liechtenstein carries a via-node no_* restriction"
    checked = 0
    auto = _arcs(*_tg(g, "auto")[:2])
    walk = _arcs(*_tg(g, "pedestrian")[:2])
    cost, _, _ = edge_costs(g, "auto")
    walk_cost, _, _ = edge_costs(g, "pedestrian")
    walk_checked = 0
    for r in rels:
        via = r["via"][0][1]
        ins = _edges_at(g, r["from"][0][1], via, ending=True)
        outs = _edges_at(g, r["to"][0][1], via, ending=False)
        for a in ins:
            for b in outs:
                if np.isfinite(cost[a]) and np.isfinite(cost[b]) and b != a ^ 1:
                    assert (a, b) not in auto  # forbidden for cars
                    assert (a, b) in forbidden_turns(g, "auto")
                    checked += 1
                    if np.isfinite(walk_cost[a]) and np.isfinite(walk_cost[b]):
                        # pedestrians obey no turn restrictions: the same junction move is open on foot
                        assert (a, b) in walk
                        walk_checked += 1
    assert checked >= 1 and walk_checked >= 1


def test_real_only_turn_restriction_is_honoured(nominatim_graph, sample, find_restrictions):
    """only_* relations of the Nominatim Liechtenstein test extract (the Valhalla one has only a
    clipped only_* at its edge): from the 'from' edge, cars may continue onto the 'to' way alone."""
    g = nominatim_graph
    cost, _, _ = edge_costs(g, "auto")
    offsets, targets, _w, _s = _tg(g, "auto")
    po, pt, _, _ = _tg(g, "pedestrian")
    checked = 0
    for r in find_restrictions(sample("liechtenstein/nominatim-apidb-test-data.osm.pbf")):
        if not (r["restriction"] or "").startswith("only_") or len(r["via"]) != 1 or r["via"][0][0] != "n":
            continue
        via = r["via"][0][1]
        v = g.node_of_osm(via)
        if v is None:
            continue
        ins = [a for a in _edges_at(g, r["from"][0][1], via, ending=True) if np.isfinite(cost[a])]
        outs = set(_edges_at(g, r["to"][0][1], via, ending=False))
        leaving = [int(e) for e in g.node_out_edges[g.node_out_offsets[v]:g.node_out_offsets[v + 1]]]
        others = [e for e in leaving if e not in outs and np.isfinite(cost[e]) and all(e != a ^ 1 for a in ins)]
        if not ins or not others:
            continue
        for a in ins:
            got = set(targets[offsets[a]:offsets[a + 1]].tolist())
            assert got <= outs, f"relation {r['id']}: edge {a} may only continue onto way {r['to'][0][1]}"
            assert not set(others) & got
            # pedestrians are not bound by it: some other way out exists on foot
            assert set(pt[po[a]:po[a + 1]].tolist()) - outs
        checked += 1
    assert checked >= 1


def _reference_arcs(g, cost, mode):
    """Plain-loop reference of turn_graph's rules."""
    usable = np.isfinite(cost)
    forb = forbidden_turns(g, mode)
    arcs = set()
    for e1 in np.flatnonzero(usable).tolist():
        v = int(g.edge_dst[e1])
        outs = [int(e) for e in g.node_out_edges[g.node_out_offsets[v]:g.node_out_offsets[v + 1]] if usable[e]]
        for e2 in outs:
            if e2 == e1 ^ 1 and any(o != e1 ^ 1 for o in outs):
                continue
            if (e1, e2) in forb:
                continue
            arcs.add((e1, e2))
    return arcs


@pytest.mark.parametrize("costing", ["auto", "pedestrian", "bicycle"])
def test_turn_graph_matches_plain_loop(liechtenstein_graph, costing):
    g = liechtenstein_graph
    cost, _t, length = edge_costs(g, costing)
    offsets, targets, weights, secondary = turn_graph(g, cost, length, mode=costing)
    assert offsets.dtype == np.int64 and targets.dtype == np.int32 and weights.dtype == np.float64
    assert len(offsets) == g.n_edges + 1 and offsets[-1] == len(targets)
    assert _arcs(offsets, targets) == _reference_arcs(g, cost, costing)
    assert np.array_equal(weights, cost[targets]) and np.array_equal(secondary, length[targets])
    assert np.isfinite(weights).all()


def test_uturn_only_at_dead_ends(liechtenstein_graph):
    g = liechtenstein_graph
    cost, _t, length = edge_costs(g, "auto")
    offsets, targets, _w, _s = turn_graph(g, cost, length, mode="auto")
    src = np.repeat(np.arange(g.n_edges), np.diff(offsets))
    uturn = targets == (src ^ 1)
    assert uturn.any()  # real dead-end streets
    usable = np.isfinite(cost)
    outdeg = np.bincount(np.asarray(g.edge_src)[usable], minlength=g.n_nodes)
    assert np.all(outdeg[g.edge_dst[src[uturn]]] == 1)


def test_turn_penalty_added_to_weights(liechtenstein_graph):
    g = liechtenstein_graph
    cost, _t, length = edge_costs(g, "auto")
    o, t, w, _ = turn_graph(g, cost, length, mode="auto", turn_penalty=lambda a: np.where(np.abs(a) > 45, 7.0, 0.0))
    src = np.repeat(np.arange(g.n_edges), np.diff(o))
    ang = turn_angles(g, src, t)
    assert np.allclose(w - cost[t], np.where(np.abs(ang) > 45, 7.0, 0.0))
    assert (np.abs(ang) > 45).any() and (np.abs(ang) <= 45).any()


def test_turn_graph_rejects_wrong_shapes(liechtenstein_graph):
    with pytest.raises(ValueError):
        turn_graph(liechtenstein_graph, np.zeros(3), np.zeros(3))


def test_turn_graph_carries_several_metrics(liechtenstein_graph):
    g = liechtenstein_graph
    cost, time_s, length = edge_costs(g, "auto")
    _o, t, _w, sec = turn_graph(g, cost, np.column_stack([time_s, length]), mode="auto")
    assert sec.shape == (len(t), 2)
    assert np.array_equal(sec[:, 0], time_s[t]) and np.array_equal(sec[:, 1], length[t])


def _turn_base_vectorised(g):
    """TurnBase's arrays the way its vectorised version made them (before its kernel)."""
    E = g.n_edges
    dst = np.asarray(g.edge_dst)
    noff = np.asarray(g.node_out_offsets, dtype=np.int64)
    cnt = np.diff(noff)[dst]
    first = np.cumsum(cnt) - cnt
    pos = np.repeat(noff[dst] - first, cnt) + np.arange(int(cnt.sum()))
    offsets = np.zeros(E + 1, np.int64)
    np.cumsum(cnt, out=offsets[1:])
    e1 = np.repeat(np.arange(E, dtype=np.int32), cnt)
    e2 = np.asarray(g.node_out_edges)[pos].astype(np.int32)
    return offsets, e1, e2, e2 == (e1 ^ 1), turn_angles(g, e1, e2)


def _allowed_by_keys(g, e1, e2, mode):
    """TurnBase.allowed the way it was computed before its kernel: np.isin on an int64 key per turn."""
    rf, rt, ro = g.restrictions_for(mode)
    if not len(rf):
        return None
    E = g.n_edges
    key = e1.astype(np.int64) * E + e2
    ok = ~np.isin(key, rf[~ro].astype(np.int64) * E + rt[~ro])
    only_from = np.zeros(E, dtype=bool)
    only_from[rf[ro]] = True
    return ok & (~only_from[e1] | np.isin(key, rf[ro].astype(np.int64) * E + rt[ro]))


@pytest.mark.parametrize("which", ["liechtenstein", "nominatim"])
def test_turn_base_equals_its_vectorised_definition(liechtenstein_graph, nominatim_graph, which):
    """The one-pass TurnBase: the same arrays, bit for bit (angles included), and the same restriction
    masks for every travel mode, on real graphs with no_* and (Nominatim extract) only_* restrictions."""
    from geoengine.graph import tags as T
    from geoengine.graph.turns import TurnBase

    g = liechtenstein_graph if which == "liechtenstein" else nominatim_graph
    base = TurnBase(g)
    ref = _turn_base_vectorised(g)
    for got, want in zip((base.offsets, base.e1, base.e2, base.uturn, base.angles), ref, strict=True):
        assert got.dtype == want.dtype
        assert got.tobytes() == want.tobytes()
    masks = 0
    for mode in T.MODE_BITS:
        got, want = base.allowed(mode), _allowed_by_keys(g, ref[1], ref[2], mode)
        assert (got is None) == (want is None), mode
        if want is not None:
            assert np.array_equal(got, want), mode
            masks += int((~want).sum()) > 0
    assert masks, "some mode has forbidden turns"
    if which == "nominatim":
        assert np.asarray(g.restr_only).any()


def test_turn_graph_rows_are_slices_of_the_whole(liechtenstein_graph):
    """turn_graph(rows=(a, b)): exactly the whole graph's arcs out of edges a..b-1, same values and
    base positions; other rows empty."""
    from geoengine.costing import turn_penalty
    from geoengine.graph.turns import turn_base

    g = liechtenstein_graph
    cost, _time_s, length = edge_costs(g, "auto")
    base = turn_base(g)
    whole = base.turn_graph(cost, length, mode="auto", turn_penalty=turn_penalty("auto"))
    cuts = [0, 1, g.n_edges // 3, g.n_edges // 3 + 1, g.n_edges - 5, g.n_edges]
    parts = [base.turn_graph(cost, length, mode="auto", turn_penalty=turn_penalty("auto"), rows=(a, b))
             for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    for (a, b), part in zip(zip(cuts[:-1], cuts[1:], strict=True), parts, strict=True):
        off = part[0]
        assert np.all(np.diff(off)[:a] == 0) and np.all(np.diff(off)[b:] == 0)
        np.testing.assert_array_equal(np.diff(off)[a:b], np.diff(whole[0])[a:b])
    for i, name in enumerate(("targets", "weights", "secondary", "base_index"), start=1):
        joined = np.concatenate([p[i] for p in parts])
        assert joined.tobytes() == whole[i].tobytes(), name
    assert len(whole[1]) > 1000
