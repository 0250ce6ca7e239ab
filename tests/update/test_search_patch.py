"""The search stage's patch (geoengine/search/records.py) on the real Liechtenstein extract: the records the
full run keeps, the affected objects read again, the later phases rerun. Every index file must equal a full
run's on the new extract byte for byte, and the patched records the full run's in content; a change of a
boundary's member way is declined. (The update flow itself: test_update.py's byte comparison.)"""

from __future__ import annotations

import filecmp
from pathlib import Path

import numpy as np
import osmium
import pytest

from geoengine.bundler.osc import OscObjects
from geoengine.search import records
from geoengine.search.documents import build_documents
from geoengine.search.write import write_index
from tests.conftest import data_file

from .conftest import EXTRACT
from .edits import WHEN


def kept_ways(folder: Path, rec: dict) -> dict:
    """id -> (tags, refs) of the kept ways of records in `folder` (their files: a later one replaces)."""
    ids = records.kept_refs(folder, rec)[0]
    return records.kept_objects(folder, rec, set(ids.tolist()))


def records_equal(a: dict, b: dict, folders: tuple | None = None) -> bool:
    """Records equal in content; the kept ways compared as the ways their files hold (the patch's files are
    the old ones with a file of its own beside them: not the full run's files) when `folders` are given."""
    if folders is not None:
        if kept_ways(folders[0], a) != kept_ways(folders[1], b):
            return False
        a, b = ({k: v for k, v in r.items() if k not in ("ways", "_files")} for r in (a, b))

    def eq(x, y):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            return (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.dtype == y.dtype
                    and np.array_equal(x, y))
        if isinstance(x, (tuple, list)):
            return type(x) is type(y) and len(x) == len(y) and all(eq(p, q) for p, q in zip(x, y, strict=True))
        return x == y

    return set(a) == set(b) and all(eq(a[k], b[k]) for k in a)


def full_run(path: Path, out: Path) -> tuple[dict, list[str]]:
    out.mkdir(parents=True, exist_ok=True)
    got = {}
    ds, _ = build_documents(path, keep=lambda *a: got.setdefault("rec", records.records_of(*a)),
                            keep_ways=str(out / "ways"))
    files, _ = write_index(out, ds)
    return got["rec"], files


def locations_of(path: Path):
    """PatchInputs.locations' stand-in: every node of the new extract (a pass over it: the test's only)."""
    ids, lon, lat = [], [], []
    for n in osmium.FileProcessor(str(path), osmium.osm.NODE):
        ok = n.location.valid()
        ids.append(n.id)
        lon.append(n.location.lon if ok else np.nan)
        lat.append(n.location.lat if ok else np.nan)
    ids, lon, lat = np.asarray(ids), np.asarray(lon), np.asarray(lat)

    def loc(q):
        k = np.clip(np.searchsorted(ids, q), 0, len(ids) - 1)
        found = (ids[k] == q) & np.isfinite(lon[k])
        return np.where(found, lon[k], np.nan), np.where(found, lat[k], np.nan), found

    return loc


def osc_of(path: Path) -> OscObjects:
    o = OscObjects()
    for obj in osmium.FileProcessor(str(path)):
        o.add(obj)
    return o


def write_versions(src: Path, out: Path, nodes: dict, ways: dict) -> tuple[Path, Path]:
    """The new extract (every object of `src`, `nodes`/`ways` id -> new object, None: deleted, new ids added)
    and the change file between them."""
    out.mkdir(parents=True, exist_ok=True)
    new, osc = out / "new.osm.pbf", out / "change.osc"
    for p in (new, osc):
        p.unlink(missing_ok=True)
    full, change = osmium.SimpleWriter(str(new)), osmium.SimpleWriter(str(osc))
    pending_nodes = dict(nodes)
    try:
        for o in osmium.FileProcessor(str(src)):
            if o.is_node():
                if o.id in pending_nodes:
                    n = pending_nodes.pop(o.id)
                    if n is None:
                        change.add_node(osmium.osm.mutable.Node(id=o.id, version=o.version + 1, timestamp=WHEN,
                                                                visible=False, tags={}))
                    else:
                        full.add_node(n)
                        change.add_node(n)
                    continue
                full.add_node(o)
            else:
                for i in sorted(pending_nodes):  # created nodes, before the ways
                    full.add_node(pending_nodes[i])
                    change.add_node(pending_nodes[i])
                pending_nodes.clear()
                if o.is_way() and o.id in ways:
                    w = ways[o.id]
                    full.add_way(w)
                    change.add_way(w)
                    continue
                full.add_way(o) if o.is_way() else full.add_relation(o)
    finally:
        full.close()
        change.close()
    return new, osc


@pytest.fixture(scope="module")
def old_records(tmp_path_factory):
    src = data_file(EXTRACT)
    folder = tmp_path_factory.mktemp("search-old")
    rec, _ = full_run(src, folder)
    return src, rec, folder


def patched_equals_full(old_records, new: Path, osc: Path, root: Path) -> dict:
    _, old, folder = old_records
    want, files = full_run(new, root / "full")
    work = root / "work"
    work.mkdir()
    rec = records.patch_read(old, osc_of(osc), locations_of(new), work, folder)
    read = records.from_records(rec)
    records.pack_docs(rec, read[0])  # (as the stage keeps them, before the later phases)
    ds, _ = build_documents(None, read=read)
    (root / "patched").mkdir()
    got_files, _ = write_index(root / "patched", ds)
    assert got_files == files
    differ = [f for f in files if not filecmp.cmp(root / "full" / f, root / "patched" / f, shallow=False)]
    assert differ == []
    records.link_kept(rec, folder, rec.pop("_files"), root / "patched")
    assert records_equal(rec, want, (root / "patched", root / "full"))
    return rec


def test_the_update_edits_patch_to_the_full_runs_index(old_records, tmp_path):
    """tests/update/edits.py's change: road nodes moved, a new road, a deleted road, a renamed street, a
    new address, a new turn restriction (a relation the search read ignores)."""
    from .edits import make_versions

    ed = make_versions(data_file(EXTRACT), tmp_path / "edits")
    patched_equals_full(old_records, ed["new"], ed["osc"], tmp_path)


def test_pois_places_and_addresses_patch_to_the_full_runs_index(old_records, tmp_path):
    """A POI moved 300 m, a POI deleted, a place node renamed (the streets' localities and the display
    names of what lies near it change), a new address on a real street."""
    src, old, _ = old_records
    pois, place, street = [], None, None

    def plain(o):  # (pyosmium's objects are valid only while the file is read)
        return {"id": o.id, "version": o.version, "lon": o.location.lon, "lat": o.location.lat, "tags": dict(o.tags)}

    for o in osmium.FileProcessor(str(src), osmium.osm.NODE | osmium.osm.WAY):
        if o.is_node() and o.tags.get("amenity") and o.tags.get("name") and len(pois) < 2:
            pois.append(plain(o))
        elif o.is_node() and o.tags.get("place") == "village" and place is None:
            place = plain(o)
        elif o.is_way() and o.tags.get("highway") == "residential" and o.tags.get("name") and street is None:
            street = o.tags["name"]
    maxid = max(o.id for o in osmium.FileProcessor(str(src), osmium.osm.NODE))
    moved, deleted = pois

    def node(d, **kw):
        d = {**d, **kw}
        return osmium.osm.mutable.Node(id=d["id"], version=d["version"] + 1, timestamp=WHEN,
                                       location=(d["lon"], d["lat"]), tags=d["tags"])

    nodes = {
        moved["id"]: node(moved, lon=moved["lon"] + 0.003, lat=moved["lat"] + 0.002),
        deleted["id"]: None,
        place["id"]: node(place, tags={**place["tags"], "name": "Neudorf am Diff"}),
        maxid + 1: osmium.osm.mutable.Node(id=maxid + 1, version=1, timestamp=WHEN, location=(9.521, 47.141),
                                           tags={"addr:housenumber": "42a", "addr:street": street}),
    }
    new, osc = write_versions(src, tmp_path / "v", nodes, {})
    patched_equals_full(old_records, new, osc, tmp_path)


def test_a_changed_boundary_patches_to_the_full_runs_index(old_records, tmp_path):
    """A member way of an administrative boundary retagged and one of its nodes moved 100 m (the boundary's
    geometry decides the hierarchy of every document in it: the later phases rerun on the patched records)."""
    import json

    src, old, folder = old_records
    admin = [k for k, t in enumerate(old["rel.tags"]) if json.loads(t).get("boundary") == "administrative"]
    assert admin
    members = set()
    for k in admin:
        a, b = old["rel.ends"][k], old["rel.ends"][k + 1]
        members.update(old["rel.mref"][a:b][old["rel.mtype"][a:b] == 1].tolist())
    way = node = None
    for o in osmium.FileProcessor(str(src), osmium.osm.WAY):
        if o.id in members and len(o.nodes) > 3:
            way = o.replace(version=o.version + 1, timestamp=WHEN, tags={**dict(o.tags), "note": "x"},
                            nodes=[n.ref for n in o.nodes])
            node = o.nodes[1].ref
            break
    moved = next(osmium.osm.mutable.Node(id=n.id, version=n.version + 1, timestamp=WHEN, tags=dict(n.tags),
                                         location=(n.location.lon + 0.001, n.location.lat))
                 for n in osmium.FileProcessor(str(src), osmium.osm.NODE) if n.id == node)
    new, osc = write_versions(src, tmp_path / "v", {node: moved}, {way.id: way})
    ch = records.Change(old, osc_of(osc), records.kept_refs(folder, old))
    assert len(ch.rels) and set(ch.rels.tolist()) & {int(old["rel.id"][k]) for k in admin}
    patched_equals_full(old_records, new, osc, tmp_path)


def test_a_relation_gaining_a_way_the_records_lack_is_declined(old_records, tmp_path):
    """A multipolygon that names a way the full run kept nothing of (no tags of use, no relation before):
    its refs are not in the records, so the patch declines (the stage runs in full)."""
    src, old, folder = old_records
    known = set(records.kept_refs(folder, old)[0].tolist())
    way = next(o.id for o in osmium.FileProcessor(str(src), osmium.osm.WAY) if o.id not in known)
    maxid = max(r.id for r in osmium.FileProcessor(str(src), osmium.osm.RELATION))
    osc = tmp_path / "rel.osc"
    w = osmium.SimpleWriter(str(osc))
    try:
        w.add_relation(osmium.osm.mutable.Relation(id=maxid + 1, version=1, members=[("w", way, "outer")],
                                                   tags={"type": "multipolygon", "natural": "wood", "name": "Diffwald"}))
    finally:
        w.close()
    with pytest.raises(records.Declined, match="not kept"):
        records.patch_read(old, osc_of(osc), locations_of(src), tmp_path, folder)


def test_the_packed_merge_takes_rows_as_take_docs_does(old_records):
    """records._take_packed (the patch's merge of the documents in their packed form) gives, for any rows of
    two packed DocSets, what packing take_docs' rows gives: every column kind (numbers, TextColumn, strings
    with None and empty ones, lists of names and categories, flags)."""
    from geoengine.search.docset import (
        DocSet,
        extend_docs,
        pack_columns,
        row_columns,
        take_docs,
        unpack_columns,
    )

    _, old, _ = old_records
    cols = row_columns()
    a = unpack_columns(DocSet(), cols, old, "doc.")
    n = len(a.id)
    half = np.arange(n // 2, n)
    b = take_docs(a, half.tolist())  # a second part, as the patch's small read gives
    b.name[0], b.name_en[1], b.detail[2] = "", None, None  # (an empty string, a None, a None detail)
    pa, pb = pack_columns(a, cols), pack_columns(b, cols)
    rows = np.random.default_rng(3).permutation(n + len(half))[: n // 2]
    both = DocSet()
    extend_docs(both, a)
    extend_docs(both, b)
    want = pack_columns(take_docs(both, rows.tolist()), cols)
    got: dict = {}
    records._take_packed(pa, pb, "", cols, rows, got)
    assert set(got) == set(want)
    for k in want:
        assert type(got[k]) is type(want[k]), k
        if isinstance(want[k], np.ndarray):
            assert got[k].dtype == want[k].dtype and np.array_equal(got[k], want[k]), k
        else:
            assert got[k] == want[k], k


def test_tags_that_need_escaping_patch_to_the_full_runs_index(old_records, tmp_path):
    """The small extract is OPL text: tag values with spaces, commas, '=', '@', '%', quotes, non-ASCII letters
    and a character beyond the BMP, on a POI node, a street way and a node moved, must read back as they are."""
    src, _, _ = old_records
    odd = 'Zum "Löwen", A=B @ 100% – Ünterland 🏔 \\ end'
    poi = street = None
    for o in osmium.FileProcessor(str(src), osmium.osm.NODE | osmium.osm.WAY):
        if o.is_node() and poi is None and o.tags.get("amenity") and o.tags.get("name"):
            poi = {"id": o.id, "version": o.version, "lon": o.location.lon, "lat": o.location.lat, "tags": dict(o.tags)}
        elif o.is_way() and street is None and o.tags.get("highway") == "residential" and o.tags.get("name"):
            street = o.replace(version=o.version + 1, timestamp=WHEN,
                               tags={**dict(o.tags), "name": odd, "name:en": "x,y=z"}, nodes=[n.ref for n in o.nodes])
    nodes = {poi["id"]: osmium.osm.mutable.Node(id=poi["id"], version=poi["version"] + 1, timestamp=WHEN,
                                                location=(poi["lon"] + 0.0001234, poi["lat"] - 0.0000567),
                                                tags={**poi["tags"], "name": odd, "a b": "c=d"})}
    new, osc = write_versions(src, tmp_path / "v", nodes, {street.id: street})
    patched_equals_full(old_records, new, osc, tmp_path)


def test_kept_tags_are_osmiums(old_records):
    """records.kept_tags (search/pbfways.py: the kept ways' files walked by compiled loops, only the wanted
    ways decoded) gives what pyosmium reads of the same ways, tags in the same order, the later file's way
    where two files hold one."""
    _, old, folder = old_records
    ids = records.kept_refs(folder, old)[0]
    want = {w: tags for w, (tags, _) in kept_ways(folder, old).items()}
    some = set(ids[:: 7].tolist()) | {int(ids[-1]), 1}  # (1: no such way)
    got = records.kept_tags(folder, old, some)
    assert set(got) == some - {1} and all(list(got[w].items()) == list(want[w].items()) for w in got)
    everything = records.kept_tags(folder, old, set(ids.tolist()))
    assert list(everything) != [] and {w: list(t.items()) for w, t in everything.items()} == {
        w: list(t.items()) for w, t in want.items()}
