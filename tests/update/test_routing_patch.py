"""The routing stage's patch (geoengine/routing/patch.py) in `geoengine update`, against an oracle.

- Nodes of roads moved (no road added or removed): the possible turns are unchanged, so the old order
  and supergraph are hard-linked and only the weights' checks run again.
- The change file of tests/update/edits.py (a new road joining two roads, a road deleted, nodes moved,
  a restriction): the old order is carried over to the surviving vertices, the new ones placed by
  their neighbours, and the supergraph contracted again.
- For both, every costing below customised on the patched topology gives Dijkstra's costs (scipy's
  csgraph on the same turn graph) for 8 x 100 random pairs, and the engine's routes agree with the
  plain Dijkstra router's.
- A change above `MAX_CHANGED`, a carried order whose supergraph outgrew the last nested dissection's
  by more than `MAX_GROWTH`, and an old topology of another format are declined: a full run.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import osmium
import pytest

import geoengine
from geoengine.bundle import Bundle
from geoengine.bundler.update import update
from geoengine.costing import default_options
from geoengine.graph import Graph
from geoengine.progress import NullProgress
from geoengine.routing import patch as routing_patch
from geoengine.routing.cch import CCHTopology
from geoengine.routing.profile import Profile
from tests.conftest import data_file
from tests.routing.osm_graph import check_against_dijkstra

from .conftest import EXTRACT, publish_copy
from .edits import WHEN

COSTINGS = ("auto", "pedestrian", "bicycle", "truck", "motorcycle")
N_SRC, N_TGT = 8, 100


def _move_road_nodes(src: Path, osc: Path, every: int = 40) -> int:
    """An .osc moving every `every`-th node of the roads (junctions and shape points) about 5 m."""
    want = set()
    for w in osmium.FileProcessor(str(src), osmium.osm.WAY):
        if w.tags.get("highway"):
            want.update(n.ref for n in w.nodes)
    picked = set(sorted(want)[::every])
    writer = osmium.SimpleWriter(str(osc))
    moved = 0
    try:
        for n in osmium.FileProcessor(str(src), osmium.osm.NODE).with_filter(osmium.filter.IdFilter(picked)):
            loc = n.location
            writer.add_node(n.replace(version=n.version + 1, timestamp=WHEN,
                                      location=(loc.lon + 0.00005, loc.lat + 0.00004)))
            moved += 1
    finally:
        writer.close()
    return moved


def _updated(old_bundle, upd_settings, root: Path, osc: Path) -> dict:
    out = publish_copy(old_bundle, root)
    old_version = Path(os.path.realpath(out))
    inodes = {p.name: p.stat().st_ino for p in (old_version / "routing" / "cch").iterdir()}
    res = update(out, upd_settings, diffs=[osc], progress=NullProgress())
    assert res["published"], res
    return {"out": out, "result": res, "old_inodes": inodes, "old": Bundle.open(old_version)}


@pytest.fixture(scope="module")
def moved(old_bundle, upd_settings, tmp_path_factory):
    root = tmp_path_factory.mktemp("moved")
    n = _move_road_nodes(data_file(EXTRACT), root / "moved.osc")
    assert n > 100
    return _updated(old_bundle, upd_settings, root, root / "moved.osc")


@pytest.fixture(scope="module")
def changed(old_bundle, upd_settings, edits, tmp_path_factory):
    return _updated(old_bundle, upd_settings, tmp_path_factory.mktemp("changed"), edits["osc"])


def _check_against_dijkstra(bundle_path: Path, costing: str, rng) -> int:
    """The bundle's (patched) hierarchy for `costing` against scipy's Dijkstra on the same turn graph."""
    graph = Graph.open(bundle_path / "graph")
    topo = CCHTopology.load(bundle_path / "routing" / "cch")
    return check_against_dijkstra(graph, topo, Profile(graph, costing, default_options(costing)), rng, N_SRC, N_TGT)


def _engine_routes_equal_plain_dijkstra(out: Path, upd_settings, rng, costing: str) -> None:
    """The engine's routes (the patched hierarchy) against its exact Dijkstra (`prof.ch = None`)."""
    e = geoengine.open(out, settings=upd_settings)
    g = e.graph
    pts = np.stack([np.asarray(g.node_lon, np.float64), np.asarray(g.node_lat, np.float64)], axis=1)
    k = rng.integers(0, len(pts), size=(60, 2))
    t_ch, d_ch = e.route_many(pts[k[:, 0]], pts[k[:, 1]], costing, unsnappable="nan")
    router = e.router
    prof = router.profile(costing, router.parse_options(costing, None))
    ch, prof.ch = prof.ch, None
    try:
        t_dj, d_dj = e.route_many(pts[k[:, 0]], pts[k[:, 1]], costing, unsnappable="nan")
    finally:
        prof.ch = ch
    assert np.isfinite(t_ch).sum() > 40
    np.testing.assert_allclose(t_ch, t_dj, rtol=1e-9)
    np.testing.assert_allclose(d_ch, d_dj, rtol=1e-9)


def test_moved_nodes_link_the_old_order_and_supergraph(moved):
    res, out = moved["result"], moved["out"]
    assert "routing" in res["stages_patched"] and "routing" not in res["stages_rebuilt"], res  # (tiles too)
    entry = Bundle.open(out).stages["routing"]
    assert entry["info"]["topology"]["patch"].startswith("same topology")
    # same_turns compares the arrays possible_turns is made of: here the turns are equal, as computed
    from geoengine.routing.customise import possible_turns

    old_g, new_g = Graph.open(moved["old"].path / "graph"), Graph.open(out / "graph")
    assert routing_patch.same_turns(old_g, new_g)
    assert all(np.array_equal(a, b) for a, b in zip(possible_turns(old_g), possible_turns(new_g), strict=True))
    # the topology files are the old bundle's (hard links): neither ordered nor contracted again
    cch = out / "routing" / "cch"
    assert {p.name: p.stat().st_ino for p in cch.iterdir()} == moved["old_inodes"]
    # what depends on weights was done again: the graph did change (edge lengths)
    old_len = np.load(moved["old"].path / "graph" / "seg_length.npy")
    assert not np.array_equal(old_len, np.load(out / "graph" / "seg_length.npy"))
    assert entry["counts"]["auto_arcs"] > 0


@pytest.mark.parametrize("costing", COSTINGS)
def test_moved_nodes_routes_equal_dijkstra(moved, upd_settings, costing):
    rng = np.random.default_rng(2900 + COSTINGS.index(costing))
    assert _check_against_dijkstra(moved["out"], costing, rng) > N_SRC * N_TGT // 2
    _engine_routes_equal_plain_dijkstra(moved["out"], upd_settings, rng, costing)


def test_a_new_and_a_deleted_road_carry_the_old_order_over(changed, edits):
    res, out = changed["result"], changed["out"]
    assert "routing" in res["stages_patched"] and "routing" not in res["stages_rebuilt"], res  # (tiles too)
    entry = Bundle.open(out).stages["routing"]
    assert entry["info"]["topology"]["patch"].startswith("order carried over")
    old_g, new_g = Graph.open(changed["old"].path / "graph"), Graph.open(out / "graph")
    assert not routing_patch.same_turns(old_g, new_g)
    from geoengine.routing.customise import possible_turns

    po, pn = possible_turns(old_g), possible_turns(new_g)
    assert len(po[1]) != len(pn[1]) or not np.array_equal(po[1], pn[1])  # (as computed)
    old_rank = np.load(changed["old"].path / "routing" / "cch" / "rank.npy")
    new_rank = np.load(out / "routing" / "cch" / "rank.npy")
    m = routing_patch.match_edges(old_g, new_g)
    kept = np.flatnonzero(m >= 0)
    fresh = len(m) - len(kept)
    assert 0 < fresh < 0.01 * len(m) and len(kept) < old_g.n_edges  # a new road and a deleted one
    # the survivors keep their relative order: sorted by new rank, their old ranks ascend
    by_new = kept[np.argsort(new_rank[kept])]
    assert (np.diff(old_rank[m[by_new]]) > 0).all()
    # matched edges are the same road pieces: the same way and end nodes
    oid, nid = np.asarray(old_g.node_osm_id), np.asarray(new_g.node_osm_id)
    assert (np.asarray(old_g.seg_way)[m[kept] >> 1] == np.asarray(new_g.seg_way)[kept >> 1]).all()
    assert (oid[np.asarray(old_g.edge_src)[m[kept]]] == nid[np.asarray(new_g.edge_src)[kept]]).all()
    # and the carried order is about as good as the old one (supergraph size)
    old_edges = changed["old"].stages["routing"]["counts"]["cch_edges"]
    assert entry["counts"]["cch_edges"] <= 1.05 * old_edges
    assert entry["info"]["topology"]["nd_edges"] == old_edges  # the nested dissection's, carried on


@pytest.mark.parametrize("costing", COSTINGS)
def test_a_new_and_a_deleted_road_routes_equal_dijkstra(changed, upd_settings, costing):
    rng = np.random.default_rng(2950 + COSTINGS.index(costing))
    assert _check_against_dijkstra(changed["out"], costing, rng) > N_SRC * N_TGT // 2
    _engine_routes_equal_plain_dijkstra(changed["out"], upd_settings, rng, costing)


def test_the_new_road_is_routed_over(changed, edits, upd_settings):
    a, b = edits["locations"]["new_road"]
    e = geoengine.open(changed["out"], settings=upd_settings)
    old = geoengine.open(changed["old"].path, settings=upd_settings)
    assert e.route_many([a], [b], "pedestrian").distance_m[0] < old.route_many([a], [b], "pedestrian").distance_m[0]


@pytest.mark.parametrize("knob", ["MAX_CHANGED", "MAX_GROWTH"])
def test_a_large_change_is_declined_and_rebuilt_in_full(old_bundle, upd_settings, edits, tmp_path, monkeypatch,
                                                        knob):
    """Too many vertices changed, or the carried order's supergraph grown too much: a full run."""
    monkeypatch.setattr(routing_patch, knob, {"MAX_CHANGED": 0.0, "MAX_GROWTH": 0.5}[knob])  # inherited by the fork
    out = publish_copy(old_bundle, tmp_path)
    res = update(out, upd_settings, diffs=[edits["osc"]], progress=NullProgress())
    assert res["published"] and "routing" in res["stages_rebuilt"] and "routing" not in res["stages_patched"], res
    entry = Bundle.open(out).stages["routing"]
    assert "patch" not in entry["info"]["topology"] and "patched_from" not in entry


def test_an_old_topology_of_another_format_is_declined(changed, tmp_path):
    old = changed["old"].path
    cch = tmp_path / "cch"
    shutil.copytree(old / "routing" / "cch", cch)
    meta = json.loads((cch / "cch.json").read_text())
    g_old, g_new = Graph.open(old / "graph"), Graph.open(changed["out"] / "graph")
    assert routing_patch.patch_topology(g_old, g_new, cch, tmp_path / "a") is not None
    meta["format_version"] = -1
    (cch / "cch.json").write_text(json.dumps(meta))
    assert routing_patch.patch_topology(g_old, g_new, cch, tmp_path / "b") is None
    (cch / "cch.json").unlink()
    assert routing_patch.patch_topology(g_old, g_new, cch, tmp_path / "c") is None


def test_carried_rank_keeps_survivors_in_order_and_places_new_vertices():
    # a path 0-1-2-3-4 (symmetric CSR); vertex 2 is new, the others kept their old ranks 3, 0, -, 1, 2
    uoff = np.array([0, 1, 3, 5, 7, 8])
    uadj = np.array([1, 0, 2, 1, 3, 2, 4, 3], np.int32)
    old_rank = np.array([3, 0, 1, 2])
    old_of_new = np.array([0, 1, -1, 2, 3])
    r = routing_patch.carried_rank(old_rank, old_of_new, uoff, uadj)
    assert sorted(r.tolist()) == [0, 1, 2, 3, 4]
    assert r.tolist() == [4, 0, 2, 1, 3]  # 2 just above its highest neighbour (3, old rank 1)
    assert routing_patch.carried_rank(old_rank, old_of_new, uoff, uadj, place="top").tolist() == [3, 0, 4, 1, 2]
