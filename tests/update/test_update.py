"""An update equals a rebuild: the change file between two versions of the Liechtenstein extract
(moved nodes, a new road, a deleted road, a renamed street, a new address, a new turn restriction;
tests/update/edits.py), applied to the old bundle with `geoengine update`, gives what a full build of
the new extract gives: the same extract, the same road graph, the same routes over 500 pairs, the
same search answers for every changed name and address, the same decoded features in every tile.
And a change that touches no road reuses the routing stage by content hash."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import mapbox_vector_tile
import numpy as np
import osmium
import pytest

import geoengine
from geoengine.bundler.pipeline import BuildInputs, build
from geoengine.bundler.update import update
from geoengine.progress import NullProgress

from .conftest import archive_tiles as _tiles
from .conftest import linked_copy, publish_copy
from .edits import WHEN


@pytest.fixture(scope="module")
def versions(old_bundle, edits, upd_settings, tmp_path_factory):
    root = tmp_path_factory.mktemp("equal")
    old_copy = linked_copy(old_bundle, root / "old-copy")  # kept to compare with (the update removes its version)
    out = publish_copy(old_bundle, root)
    before = os.path.realpath(out)
    report: dict = {}
    result = update(out, upd_settings, diffs=[edits["osc"]], report=report)
    full = build(BuildInputs(osm=edits["new"]), root / "full" / "li", upd_settings, progress=NullProgress())
    engines = {name: geoengine.open(p, settings=upd_settings)
               for name, p in (("old", old_copy), ("updated", out), ("full", full))}
    return {"out": out, "before": before, "full": full, "old": old_copy, "result": result, "report": report,
            "engines": engines}


def _objects(path: Path) -> list[tuple]:
    rows = []
    for o in osmium.FileProcessor(str(path)):
        base = (o.type_str(), o.id, o.version, sorted(dict(o.tags).items()))
        if o.is_node():
            rows.append((*base, round(o.location.lon, 7), round(o.location.lat, 7)))
        elif o.is_way():
            rows.append((*base, [n.ref for n in o.nodes]))
        else:
            rows.append((*base, [(m.type, m.ref, m.role) for m in o.members]))
    return rows


def test_the_update_publishes_a_new_version_and_says_what_it_rebuilt(versions, edits):
    res = versions["result"]
    out = versions["out"]
    assert res["published"] and os.path.realpath(out) != versions["before"]
    assert Path(versions["before"]).exists()  # kept until the next publication, for servers still on it
    # every stage read the changed extract: each is rebuilt in full or patched (source: its object store
    # patched, tests/update/test_store.py; graph: its kept read patched; routing: the old CCH order carried over,
    # tests/update/test_routing_patch.py; tiles: only the tiles the change touches are cut again,
    # tests/update/test_update_tiles.py), and the update says so
    # (search: its kept records patched, tests/update/test_search_patch.py)
    assert res["stages_rebuilt"] == [] and res["stages_reused"] == []
    assert res["stages_patched"] == ["source", "graph", "routing", "search", "tiles"]  # graph: tests/update/test_graph_patch.py
    assert res["objects"] == {"nodes": {"changed": 7, "created": 2, "deleted": 0},
                              "ways": {"changed": 3, "created": 1, "deleted": 1},
                              "relations": {"changed": 1, "created": 1, "deleted": 0}}
    assert {"download", "check", "apply", "graph", "tiles"} <= set(versions["report"]["steps"])


def test_the_updated_extract_is_the_new_extract(versions, edits):
    updated = _objects(versions["out"] / "source" / "extract.osm.pbf")
    assert updated == _objects(edits["new"])
    # the source stage, patched (its object store merged with the change), says what a full run says
    # of the new extract, and keeps the same store
    mine, full = (geoengine.bundle.Bundle.open(versions[k]).stages["source"] for k in ("out", "full"))
    assert (mine["counts"], mine["info"]) == (full["counts"], full["info"])
    for f in sorted((versions["full"] / "source" / "store").iterdir()):
        assert f.read_bytes() == (versions["out"] / "source" / "store" / f.name).read_bytes(), f.name
    ids = {(r[0], r[1]) for r in updated}
    assert ("w", edits["deleted_way"]) not in ids and ("w", edits["new_way"]) in ids
    assert ("r", edits["restriction"]) in ids and ("n", edits["address_node"]) in ids


def test_the_manifest_and_info_record_the_data_age(versions):
    e = versions["engines"]
    stamp = WHEN.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert e["old"].info()["data_timestamp"] == "2015-07-27T21:14:01Z"  # the Geofabrik extract's header
    info = e["updated"].info()
    assert info["data_timestamp"] == stamp == e["full"].info()["data_timestamp"]
    assert info["replication_sequence"] is None  # a --diff without --sequence
    assert info["data_age_s"] > 10 * 365 * 86400
    m = e["updated"].bundle.manifest
    assert m["update"]["diffs"] == ["change.osc.gz"] and m["update"]["from"] == Path(versions["before"]).name


def test_the_patched_search_index_is_the_full_builds_byte_for_byte(versions):
    """The search stage was patched (search/records.py): every index file equals the full build's, and the
    kept records equal the full build's in content (pickle may share equal strings differently; the kept ways
    are the old bundle's files with the patch's beside them)."""
    from geoengine.search import records

    from .test_search_patch import records_equal

    up, full = versions["out"] / "search", versions["full"] / "search"
    want = records.load(full)
    index = sorted(p.name for p in full.iterdir() if p.name != records.FILE and not p.name.startswith("ways-"))
    assert index == sorted(p.name for p in up.iterdir() if p.name != records.FILE and not p.name.startswith("ways-"))
    for name in index:
        assert (up / name).read_bytes() == (full / name).read_bytes(), name
    assert records_equal(records.load(up), want, (up, full))
    assert "search" in versions["result"]["stages_patched"]


def test_the_road_graph_equals_the_full_builds(versions):
    upd, full, old = (versions[k] / "graph" for k in ("out", "full", "old"))
    names = sorted(str(p.relative_to(full)) for p in full.rglob("*") if p.is_file())  # graph/raw/ too
    assert names == sorted(str(p.relative_to(upd)) for p in upd.rglob("*") if p.is_file())
    assert "raw/refs.npy" in names
    for name in names:
        assert (upd / name).read_bytes() == (full / name).read_bytes(), name
    assert any((old / n).read_bytes() != (full / n).read_bytes() for n in names)  # the edits reached the graph


def test_routes_over_500_pairs_equal_the_full_builds(versions, edits):
    e = versions["engines"]
    g = e["full"].graph
    rng = np.random.default_rng(29)
    lon, lat = np.asarray(g.node_lon, dtype=np.float64), np.asarray(g.node_lat, dtype=np.float64)
    k = rng.integers(0, len(lon), size=(480, 2))
    pts = np.stack([lon, lat], axis=1)
    o, d = pts[k[:, 0]], pts[k[:, 1]]
    # and 20 pairs from the edited places to random nodes (the new road, the moved nodes, the deleted road, ...)
    spots = np.array([p for group in edits["locations"].values() for p in group][:20], dtype=np.float64)
    o = np.concatenate([o, spots])
    d = np.concatenate([d, pts[rng.integers(0, len(lon), size=len(spots))]])
    assert len(o) == 500
    for costing in ("auto", "pedestrian"):
        t_upd, d_upd = e["updated"].route_many(o, d, costing, unsnappable="nan")
        t_full, d_full = e["full"].route_many(o, d, costing, unsnappable="nan")
        np.testing.assert_array_equal(t_upd, t_full)
        np.testing.assert_array_equal(d_upd, d_full)
        assert np.isfinite(t_upd).sum() > 400
    # the new road is a shortcut between its two ends: shorter than in the old bundle
    a, b = edits["locations"]["new_road"]
    new = e["updated"].route_many([a], [b], "pedestrian")
    old = e["old"].route_many([a], [b], "pedestrian")
    assert new.distance_m[0] < old.distance_m[0]


def _answers(engine, q):
    res = engine.search(q, size=10)["results"]
    return [(r["id"], r["name"], r["display_name"], r["location"], r["score"]) for r in res]


def test_search_answers_for_every_changed_name_and_address_equal_the_full_builds(versions, edits):
    e = versions["engines"]
    queries = [edits["new_street"], edits["renamed_to"], edits["renamed_from"], edits["deleted_name"],
               edits["address"], f"{edits['renamed_to']} 99 Vaduz"]
    for q in queries:
        assert _answers(e["updated"], q) == _answers(e["full"], q), q
    found = e["updated"].search(edits["new_street"], size=5)["results"]
    assert found and found[0]["name"] == edits["new_street"]
    assert not any(edits["new_street"] in str(r) for r in e["old"].search(edits["new_street"], size=5)["results"])
    renamed = e["updated"].search(edits["renamed_to"], size=5)["results"]
    assert renamed and renamed[0]["name"] == edits["renamed_to"]
    address = e["updated"].search(edits["address"], size=3)["results"]
    assert address and address[0]["id"] == f"osm:node:{edits['address_node']}"


def _decoded(data: bytes) -> dict:
    raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return mapbox_vector_tile.decode(raw)


def test_the_decoded_features_of_every_changed_tile_equal_the_full_builds(versions):
    old, upd, full = (_tiles(versions[k]) for k in ("old", "out", "full"))
    assert set(upd) == set(full)
    changed = [k for k in full if k not in old or _decoded(old[k]) != _decoded(full[k])]
    assert changed, "the edits changed no tile"
    assert any(z == 14 for z, _, _ in changed)
    for k in changed:
        assert _decoded(upd[k]) == _decoded(full[k]), k
    for k in set(full) - set(changed):  # and the others stayed as they were
        assert _decoded(upd[k]) == _decoded(old[k]), k


def test_a_change_that_touches_no_road_reuses_the_routing_stage(versions, edits, upd_settings, tmp_path):
    """A new address point and a renamed shop: the graph stage reruns (the extract changed) and writes
    the same files, so the routing stage, which reads only the graph (and elevation), is reused."""
    out = publish_copy(versions["out"], tmp_path)
    osc = tmp_path / "poi.osc"
    shop = next(o.replace(version=o.version + 1, tags={**dict(o.tags), "name": "Diffladen"}, location=o.location)
                for o in osmium.FileProcessor(str(edits["new"]), osmium.osm.NODE)
                if o.tags.get("shop") and o.tags.get("name"))
    w = osmium.SimpleWriter(str(osc))
    try:
        w.add_node(shop)
        w.add_node(osmium.osm.mutable.Node(id=edits["address_node"] + 1, version=1, location=(9.52, 47.14),
                                           tags={"addr:housenumber": "7", "addr:street": edits["renamed_to"]}))
    finally:
        w.close()
    cch = sorted((out / "routing" / "cch").iterdir())
    inodes = [p.stat().st_ino for p in cch]
    res = update(out, upd_settings, diffs=[osc], progress=NullProgress())
    assert res["published"] and res["stages_reused"] == ["routing"], res
    assert sorted(res["stages_rebuilt"] + res["stages_patched"]) == sorted(["source", "graph", "search", "tiles"])
    assert "tiles" in res["stages_patched"]
    assert [(out / "routing" / "cch" / p.name).stat().st_ino for p in cch] == inodes  # hard links, not a rebuild
    m = geoengine.open(out, settings=upd_settings)
    assert m.bundle.stages["routing"]["reused_from"] == Path(os.path.realpath(versions["out"])).name or \
        m.bundle.stages["routing"].get("reused_from")
    rng = np.random.default_rng(7)
    g = m.graph
    pts = np.stack([np.asarray(g.node_lon, dtype=np.float64), np.asarray(g.node_lat, dtype=np.float64)], axis=1)
    k = rng.integers(0, len(pts), size=(100, 2))
    got = m.route_many(pts[k[:, 0]], pts[k[:, 1]], "auto", unsnappable="nan")
    want = versions["engines"]["full"].route_many(pts[k[:, 0]], pts[k[:, 1]], "auto", unsnappable="nan")
    np.testing.assert_array_equal(got.time_s, want.time_s)
    assert any("Diffladen" in str(r) for r in m.search("Diffladen", size=3)["results"])
