"""The bundle's object store (geoengine.bundler.middle): what the block scanner keeps equals what
osmium reads, the store patched with a change equals the store of the changed extract, and the
locations an update hands the stages' patches equal osmium's in the new extract."""

from __future__ import annotations

import numpy as np
import osmium
import pytest

from geoengine.bundler import middle
from geoengine.bundler.pbfscan import scan_pbf
from geoengine.bundler.update import existing_versions, read_changes
from tests.conftest import data_file

from .conftest import EXTRACT


def _osmium_objects(path) -> dict:
    out = {"n": {}, "w": {}, "r": {}}
    for o in osmium.FileProcessor(str(path)):
        t = o.type_str()
        out[t][o.id] = (o.version, o.location.x, o.location.y) if t == "n" else (o.version,)
    return out


def _store_objects(arrays) -> dict:
    out = {}
    for t in "nwr":
        a = arrays[t]
        cols = [a["version"]] + ([a["x"], a["y"]] if t == "n" else [])
        out[t] = {i: tuple(int(c[k]) for c in cols) for k, i in enumerate(a["id"].tolist())}
    return out


@pytest.mark.parametrize("rel", [EXTRACT, "andorra/andorra.osm.pbf"])
def test_scan_keeps_what_osmium_reads(rel, tmp_path):
    path = data_file(rel)
    scan = scan_pbf(path, keep=True)
    middle.write(tmp_path, scan["objects"])
    store = middle.Store.open(tmp_path)
    assert _store_objects(store.arrays) == _osmium_objects(path)
    assert store.bbox() == scan["bbox"]
    assert middle.Store.open(tmp_path / "missing") is None
    (tmp_path / middle.META).write_text('{"format": 0}')  # another format's store is not read
    assert middle.Store.open(tmp_path) is None


def test_patched_store_equals_the_new_extracts(edits, tmp_path):
    scan = scan_pbf(edits["old"], keep=True)
    middle.write(tmp_path / "old", scan["objects"])
    store = middle.Store.open(tmp_path / "old")
    changes = read_changes([edits["osc"]])
    want = _osmium_objects(edits["new"])
    for chunk in (1 << 22, 997):  # one chunk, and many (each chunk merges the new ids of its range)
        store.CHUNK = chunk
        store.write_patched(tmp_path / f"new-{chunk}", changes.osc)
        patched = middle.Store.open(tmp_path / f"new-{chunk}")
        assert _store_objects(patched.arrays) == want
    # the same bytes as a store written from the new extract's scan
    middle.write(tmp_path / "scan", scan_pbf(edits["new"], keep=True)["objects"])
    for f in [*middle.files(), middle.META]:
        assert (tmp_path / "scan" / f).read_bytes() == (tmp_path / "new-997" / f).read_bytes(), f
    # the check reads the versions from the store as the osmium scan does
    assert existing_versions(edits["old"], changes, store) == existing_versions(edits["old"], changes)


def test_locations_are_osmiums_in_the_new_extract(edits, tmp_path):
    scan = scan_pbf(edits["old"], keep=True)
    middle.write(tmp_path, scan["objects"])
    store = middle.Store.open(tmp_path)
    changes = read_changes([edits["osc"]])
    new = {o.id: (o.location.lon, o.location.lat) for o in osmium.FileProcessor(str(edits["new"]), osmium.osm.NODE)}
    deleted = sorted(changes.deleted["n"])
    moved = sorted(i for i in changes.osc.nodes if i not in changes.deleted["n"])
    assert moved
    rng = np.random.default_rng(7)
    some = rng.choice(np.fromiter(new, np.int64), 2000, replace=False)
    ids = np.r_[some, moved, deleted, [-5, 1 << 60]].astype(np.int64)
    lon, lat, found = middle.locations(store, changes.osc, ids)
    for i, x, y, f in zip(ids.tolist(), lon.tolist(), lat.tolist(), found.tolist(), strict=True):
        if i in new:
            assert f and (x, y) == new[i], i
        else:
            assert not f and np.isnan(x) and np.isnan(y)
    x_old, _, had = store.fixed(np.asarray(edits["moved_nodes"], np.int64))
    lon_new, _, _ = middle.locations(store, changes.osc, np.asarray(edits["moved_nodes"], np.int64))
    assert had.all() and (x_old / 1e7 != lon_new).any()  # the change moves them: the overlay is read


def _node_change(path, nodes) -> object:
    """A change file of nodes (id, version, lon, lat; lon None: deleted), read as an update reads it."""
    writer = osmium.SimpleWriter(str(path))
    try:
        for i, v, lon, lat in nodes:
            if lon is None:
                writer.add_node(osmium.osm.mutable.Node(id=i, version=v, visible=False))
            else:
                writer.add_node(osmium.osm.mutable.Node(id=i, version=v, location=(lon, lat)))
    finally:
        writer.close()
    return read_changes([path]).osc


def test_the_box_after_a_change_is_the_patched_stores(edits, tmp_path):
    """`bbox_after` (what lets an update's patches start before the source stage) gives the patched
    store's bbox, or None where a changed node held an extreme of the old box."""
    scan = scan_pbf(edits["old"], keep=True)
    middle.write(tmp_path / "old", scan["objects"])
    store = middle.Store.open(tmp_path / "old")
    box = store.bbox()
    a = store.arrays["n"]
    west = int(a["id"][int(np.argmin(a["x"]))])  # the node on the box's west edge
    inner = int(a["id"][int(np.argsort(a["x"])[len(a["x"]) // 2])])
    top = int(a["id"].max())
    lon0, lat0 = float(a["x"][len(a["x"]) // 2]) / 1e7, float(a["y"][len(a["y"]) // 2]) / 1e7
    cases = {
        "the edits": (read_changes([edits["osc"]]).osc, True),
        "inside": (_node_change(tmp_path / "in.osc", [(inner, 99, lon0 + 1e-4, lat0)]), True),
        "grows": (_node_change(tmp_path / "grow.osc", [(top + 1, 1, box[2] + 0.01, box[3] + 0.02)]), True),
        "west moved": (_node_change(tmp_path / "west.osc", [(west, 99, box[0] + 0.001, lat0)]), False),
        "west deleted": (_node_change(tmp_path / "wdel.osc", [(west, 99, None, None)]), False),
    }
    for name, (osc, known) in cases.items():
        got = store.bbox_after(osc, box)
        if not known:
            assert got is None, name
            continue
        store.write_patched(tmp_path / name, osc)
        assert got == middle.Store.open(tmp_path / name).bbox(), name
    assert store.bbox_after(cases["grows"][0], box) != box  # (the box grew)
