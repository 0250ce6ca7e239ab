"""The tile stage's patch (geoengine/tiles/stage.py `patch`, slim.py, patch.py): an update patches the kept
collection from the change alone, cuts again only the tiles the change touches and copies the others from
the old archive, and every tile of the result (all zooms) is byte for byte the tile a full build of the
new extract makes: on the Liechtenstein change of tests/update/edits.py, on a second change (a
multipolygon's inner member deleted, a node shared by an area and another way moved), on update_bench's
spread change (without reading either extract), and on two updates in a row. It declines, and the stage
runs in full, when the change touches too large a share of the tiles, the old tiles were made by another
geoengine, or the old bundle keeps no collection."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from pathlib import Path

import osmium

from geoengine.bundle import Bundle
from geoengine.bundler.pipeline import BuildInputs, PatchInputs, build
from geoengine.bundler.update import read_changes, update
from geoengine.progress import NullProgress
from geoengine.tiles import stage as tile_stage

from .conftest import EXTRACT, linked_copy, publish_copy
from .conftest import archive_tiles as _tiles

WHEN2 = dt.datetime(2015, 7, 29, 10, 0, 0, tzinfo=dt.UTC)
BOX = (9.47, 47.04, 9.64, 47.28)  # around Liechtenstein (lon/lat)


def _metadata(bundle: Path) -> dict:
    (path,) = (bundle / "tiles").glob("*.mbtiles")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return dict(db.execute("SELECT name, value FROM metadata").fetchall())


def _assert_same_archive(updated: Path, full: Path, old: Path) -> int:
    """Every tile of the updated archive is the full build's, bytes included (gzip with mtime 0, so equal
    bytes are equal features); the metadata too. Returns how many tiles the change altered."""
    upd, want, before = _tiles(updated), _tiles(full), _tiles(old)
    assert set(upd) == set(want), (sorted(set(upd) ^ set(want))[:10])
    bad = [k for k in want if upd[k] != want[k]]
    assert not bad, f"{len(bad)} tiles differ from the full build's, e.g. {bad[:5]}"
    assert _metadata(updated) == _metadata(full)
    assert set(range(2, 15)) <= {z for z, _, _ in want}  # (Liechtenstein has no tile at z0-1)
    return sum(1 for k in want if before.get(k) != want[k])


def _update_and_full(old_bundle, new_extract, osc, settings, root: Path, **kw) -> dict:
    out = publish_copy(old_bundle, root)
    result = update(out, settings, diffs=[osc], progress=NullProgress(), **kw)
    full = build(BuildInputs(osm=new_extract), root / "full" / "li", settings, progress=NullProgress())
    return {"out": out, "full": full, "result": result, "entry": Bundle.open(out).stages["tiles"]}


def test_the_patched_archive_equals_the_full_builds_on_the_liechtenstein_change(old_bundle, edits, upd_settings,
                                                                               tmp_path):
    r = _update_and_full(old_bundle, edits["new"], edits["osc"], upd_settings, tmp_path)
    assert "tiles" in r["result"]["stages_patched"] and "tiles" not in r["result"]["stages_rebuilt"]
    changed = _assert_same_archive(r["out"], r["full"], old_bundle)
    assert changed > 0
    info = r["entry"]["info"]["patch"]
    # a handful of tiles per zoom, not the archive: the rest were copied
    assert 0 < info["tiles_recut"] < info["tiles_planned"] / 4, info
    assert info["tiles_copied"] > 0 and info["tiles_made"] + info["tiles_copied"] == r["entry"]["counts"]["tiles"]
    assert r["entry"]["counts"] == Bundle.open(r["full"]).stages["tiles"]["counts"]
    _assert_spliced(info)
    _assert_same_seq_lists(r["out"], r["full"])


def _assert_spliced(info: dict) -> None:
    """The touched tiles were spliced (geoengine.tiles.splice), not cut again: every one the old bundle
    kept a seq list of."""
    sp = info["splice"]
    assert sp is not None and sp["tiles_spliced"] > 0, info
    assert sp["tiles_splice_declined"] == 0, info
    assert sp["tiles_spliced"] + sp["tiles_not_kept"] == info["tiles_recut"], info


def _assert_same_seq_lists(updated: Path, full: Path) -> None:
    """The patched bundle's seq lists name the full build's features, tile for tile (by their place in
    the kept index: a patch's seqs are in the gaps, the order is the same)."""
    import numpy as np

    from geoengine.tiles import kept as K
    from geoengine.tiles import splice

    lists = []
    for b in (updated, full):
        folder = b / "tiles" / K.FOLDER
        kept, seq = splice.Kept.load(folder), np.load(folder / "index.npy")["seq"]
        e = kept.seqs
        pos = np.searchsorted(seq, np.where(e >= 0, e, -1 - e))
        lists.append((kept.key, kept.off, np.where(e >= 0, pos, -1 - pos), kept.mixed))
    for a, b in zip(*lists, strict=True):
        assert np.array_equal(a, b)


def make_second_change(src: Path, out_dir: Path) -> dict:
    """A second change to `src`, made with pyosmium object by object: a multipolygon relation loses an
    inner member (the relation gets a new version without it and the way is deleted), and a node that an
    area's way shares with another way moves ~25 m. Writes `new/<name>` and `change.osc.gz`."""
    way_refs: dict[int, list[int]] = {}
    use: dict[int, int] = {}
    closed_area: set[int] = set()
    relations = []
    member_of: dict[int, int] = {}
    for o in osmium.FileProcessor(str(src), osmium.osm.WAY | osmium.osm.RELATION):
        if o.is_way():
            refs = [n.ref for n in o.nodes]
            way_refs[o.id] = refs
            for r in refs:
                use[r] = use.get(r, 0) + 1
            if len(refs) > 3 and refs[0] == refs[-1] and (o.tags.get("landuse") or o.tags.get("natural")):
                closed_area.add(o.id)
        else:
            for m in o.members:
                if m.type == "w":
                    member_of[m.ref] = member_of.get(m.ref, 0) + 1
            if o.tags.get("type") == "multipolygon":
                relations.append((o.id, [(m.type, m.ref, m.role) for m in o.members]))
    rel_id, inner = next((rid, next(m[1] for m in ms if m[2] == "inner" and m[0] == "w" and member_of.get(m[1]) == 1
                                    and m[1] in way_refs))
                         for rid, ms in sorted(relations)
                         if sum(1 for m in ms if m[2] == "inner" and m[0] == "w" and member_of.get(m[1]) == 1
                                and m[1] in way_refs) >= 1)
    # the moved node: on an outer member way of another multipolygon (its whole area must be cut again),
    # shared with a second way where there is one
    outers = [m[1] for rid, ms in sorted(relations) if rid != rel_id for m in ms
              if m[0] == "w" and m[2] == "outer" and m[1] in way_refs and len(way_refs[m[1]]) > 3]
    shared = next((r for w in outers for r in way_refs[w][1:-1] if use.get(r, 0) >= 2),
                  next(r for w in sorted(closed_area) for r in way_refs[w][1:-1] if use.get(r, 0) >= 2))
    out_dir.mkdir(parents=True, exist_ok=True)
    new_dir = out_dir / "new"
    new_dir.mkdir(exist_ok=True)
    new_path, osc_path = new_dir / src.name, out_dir / "change.osc.gz"
    for p in (new_path, osc_path):
        p.unlink(missing_ok=True)
    h = osmium.io.Header()
    reader = osmium.io.Reader(str(src), osmium.osm.osm_entity_bits.NOTHING)
    h.add_box(reader.header().box())
    reader.close()
    h.set("osmosis_replication_timestamp", WHEN2.strftime("%Y-%m-%dT%H:%M:%SZ"))

    def bumped(o, **kw):
        return o.replace(version=o.version + 1, timestamp=WHEN2, changeset=2, uid=1, user="geoengine-test", **kw)

    full = osmium.SimpleWriter(str(new_path), header=h)
    change = osmium.SimpleWriter(str(osc_path))
    moved = None
    try:
        for o in osmium.FileProcessor(str(src)):
            if o.is_node() and o.id == shared:
                moved = (o.location.lon, o.location.lat)
                n = bumped(o, location=(o.location.lon + 0.0003, o.location.lat + 0.0001))
                full.add_node(n)
                change.add_node(n)
            elif o.is_way() and o.id == inner:
                change.add_way(bumped(o, visible=False, nodes=[], tags={}))
            elif o.is_relation() and o.id == rel_id:
                r = bumped(o, members=[(m.type, m.ref, m.role) for m in o.members if not (m.type == "w" and m.ref == inner)])
                full.add_relation(r)
                change.add_relation(r)
            else:
                full.add(o)
    finally:
        full.close()
        change.close()
    return {"new": new_path, "osc": osc_path, "relation": rel_id, "inner": inner, "shared_node": shared,
            "moved_from": moved}


def test_the_patched_archive_equals_the_full_builds_on_a_deleted_member_and_a_moved_shared_node(
        old_bundle, edits, upd_settings, tmp_path, monkeypatch):
    # the two multipolygons' areas touch more than the share a patch takes on by default (a cost
    # policy measured at 16 copies); here the patch must be exact, so it is allowed more
    monkeypatch.setattr(tile_stage, "PATCH_MAX_SHARE", 0.5)
    second = make_second_change(edits["old"], tmp_path / "second")
    r = _update_and_full(old_bundle, second["new"], second["osc"], upd_settings, tmp_path)
    assert "tiles" in r["result"]["stages_patched"]
    assert r["result"]["objects"]["relations"]["changed"] == 1 and r["result"]["objects"]["ways"]["deleted"] == 1
    assert _assert_same_archive(r["out"], r["full"], old_bundle) > 0
    info = r["entry"]["info"]["patch"]
    assert 0 < info["tiles_recut"] < info["tiles_planned"] / 2, info


def test_the_patch_declines_a_change_that_touches_too_many_tiles(old_bundle, edits, upd_settings, tmp_path,
                                                                 monkeypatch):
    # (the stage's patch runs in a forked child: the child inherits the lowered share)
    monkeypatch.setattr(tile_stage, "PATCH_MAX_SHARE", 0.0)
    r = _update_and_full(old_bundle, edits["new"], edits["osc"], upd_settings, tmp_path)
    assert "tiles" in r["result"]["stages_rebuilt"] and "tiles" not in r["result"]["stages_patched"]
    assert "patch" not in r["entry"]["info"]
    _assert_same_archive(r["out"], r["full"], old_bundle)


def test_the_patch_declines_tiles_of_another_geoengine(old_bundle, edits, upd_settings, tmp_path):
    """Called directly: the old bundle was built by another geoengine (whose cut may differ; a bundle of
    another tile stage version does not open at all), so `patch` returns None before reading anything
    (the pipeline then runs the stage in full)."""
    old = linked_copy(old_bundle, tmp_path / "old")
    manifest = old / "manifest.json"
    doc = json.loads(manifest.read_text())
    doc["geoengine_version"] = "0.0.1"
    manifest.unlink()  # a hard link to the session's bundle: replaced, not written through
    manifest.write_text(json.dumps(doc))
    bundle = Bundle.open(old)
    p = PatchInputs(old=bundle, old_extract=edits["old"], new_extract=edits["new"], files=(edits["osc"],),
                    changes=read_changes([edits["osc"]]))
    from geoengine.bundler.pipeline import BuildContext

    work = tmp_path / "work"
    work.mkdir()
    ctx = BuildContext(out=work, inputs=BuildInputs(osm=edits["new"]), settings=upd_settings, progress=NullProgress(),
                       results={"source": bundle.stages["source"]})
    assert tile_stage.patch(ctx, p) is None
    assert not (work / "tiles" / "spool").exists()
    # and with the right version it would patch (the same call on the unedited manifest)
    ok = PatchInputs(old=Bundle.open(old_bundle), old_extract=edits["old"], new_extract=edits["new"],
                     files=(edits["osc"],), changes=read_changes([edits["osc"]]))
    assert tile_stage._why_not(ctx, ok, tile_stage.source_id(ctx),
                               Path(os.path.realpath(old_bundle)) / "tiles" /
                               f"{tile_stage.source_id(ctx)}.mbtiles") is None


def _named(bundle: Path, tmp_path: Path) -> Path:
    """The bundle's kept extract under the original file's name (the archive's name and title come from it)."""
    import shutil

    dst = tmp_path / "named" / Path(EXTRACT).name
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.unlink(missing_ok=True)
    shutil.copy(bundle / "source" / "extract.osm.pbf", dst)
    return dst


def _no_extracts(monkeypatch):
    """The collection's patch gets extract paths that do not exist: it reads neither extract."""
    import dataclasses

    from geoengine.tiles import slim

    real = slim.build

    def build(bbox, p, old, work, **kw):
        gone = Path("/nonexistent/extract.osm.pbf")
        return real(bbox, dataclasses.replace(p, old_extract=gone, new_extract=gone), old, work, **kw)

    monkeypatch.setattr(slim, "build", build)


def test_the_spread_change_is_patched_from_the_kept_collection(old_bundle, upd_settings, tmp_path, monkeypatch):
    """update_bench's spread change (every 50th way of the extract: a changed tag, its first node moved
    ~5 m) on Liechtenstein, patched without reading either extract: every tile equals the full build's."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from update_bench import make_change

    _no_extracts(monkeypatch)
    monkeypatch.setattr(tile_stage, "PATCH_MAX_SHARE", 1.0)  # (a cost policy; here the patch must be exact)
    osc = tmp_path / "spread.osc.gz"
    made = make_change(Path(os.path.realpath(old_bundle)) / "source" / "extract.osm.pbf", osc, 0.02)
    assert made["ways_changed"] > 100
    out = publish_copy(old_bundle, tmp_path)
    result = update(out, upd_settings, diffs=[osc], progress=NullProgress())
    assert "tiles" in result["stages_patched"], result
    full = build(BuildInputs(osm=_named(out, tmp_path)), tmp_path / "full" / "li", upd_settings, progress=NullProgress())
    assert _assert_same_archive(out, full, old_bundle) > 0
    entry = Bundle.open(out).stages["tiles"]
    assert entry["counts"] == Bundle.open(full).stages["tiles"]["counts"]
    assert entry["info"]["patch"]["objects"]["w"] >= made["ways_changed"]
    _assert_spliced(entry["info"]["patch"])
    _assert_same_seq_lists(out, full)


def test_an_old_bundle_without_seq_lists_cuts_the_touched_tiles_again(old_bundle, edits, upd_settings, tmp_path):
    """A bundle built before the seq lists were kept (a collection without tileseqs.npz): the touched tiles
    are cut again as before, the archive is the full build's, and no partial seq lists are written."""
    from geoengine.tiles import kept as K
    from geoengine.tiles import splice

    out = publish_copy(old_bundle, tmp_path)
    (out / "tiles" / K.FOLDER / splice.FILE).unlink()
    result = update(out, upd_settings, diffs=[edits["osc"]], progress=NullProgress())
    assert "tiles" in result["stages_patched"], result
    full = build(BuildInputs(osm=edits["new"]), tmp_path / "full" / "li", upd_settings, progress=NullProgress())
    assert _assert_same_archive(out, full, old_bundle) > 0
    info = Bundle.open(out).stages["tiles"]["info"]["patch"]
    assert info["splice"] is None and info["tiles_made"] > 0, info
    assert not (out / "tiles" / K.FOLDER / splice.FILE).exists()


def test_a_second_update_patches_the_patched_collection(old_bundle, edits, upd_settings, tmp_path, monkeypatch):
    """Two updates in a row (the Liechtenstein change, then the second change made on its result): the
    second patches the collection the first one wrote, and the archive equals a full build's again; the
    kept collection too, feature for feature (the index, less the seqs, which a patch places in the gaps)."""
    import numpy as np

    from geoengine.tiles import kept as K

    _no_extracts(monkeypatch)
    monkeypatch.setattr(tile_stage, "PATCH_MAX_SHARE", 1.0)
    out = publish_copy(old_bundle, tmp_path)
    first = update(out, upd_settings, diffs=[edits["osc"]], progress=NullProgress())
    assert "tiles" in first["stages_patched"]
    second = make_second_change(_named(out, tmp_path), tmp_path / "second")
    result = update(out, upd_settings, diffs=[second["osc"]], progress=NullProgress())
    assert "tiles" in result["stages_patched"], result
    full = build(BuildInputs(osm=second["new"]), tmp_path / "full" / "li", upd_settings, progress=NullProgress())
    _assert_same_archive(out, full, old_bundle)
    # the second update spliced from the seq lists the first one wrote
    _assert_spliced(Bundle.open(out).stages["tiles"]["info"]["patch"])
    _assert_same_seq_lists(out, full)
    a = np.load(out / "tiles" / K.FOLDER / "index.npy")
    b = np.load(full / "tiles" / K.FOLDER / "index.npy")
    assert len(a) == len(b)
    assert (a["obj"] == b["obj"]).all() and (a["layer"] == b["layer"]).all()  # the same order
    assert np.array_equal(a["bounds"], b["bounds"], equal_nan=True)
    wa, wb = (K.load_ways(x / "tiles" / K.FOLDER / "ways") for x in (out, full))
    for k in range(3):  # ids, offsets, refs
        assert np.array_equal(wa[k], wb[k]), k
    assert sorted(wa[3].tolist()) == sorted(wb[3].tolist())


def test_the_patch_declines_an_old_bundle_without_a_collection(old_bundle, edits, upd_settings, tmp_path):
    """A bundle built before the collection was kept: the stage runs in full (and keeps one)."""
    import shutil

    src = linked_copy(old_bundle, tmp_path / "old")
    shutil.rmtree(src / "tiles" / "collection")
    out = tmp_path / "bundles" / "li"
    out.parent.mkdir(parents=True)
    from geoengine.bundler.pipeline import publish

    publish(src, out)
    result = update(out, upd_settings, diffs=[edits["osc"]], progress=NullProgress())
    assert "tiles" in result["stages_rebuilt"]
    assert (out / "tiles" / "collection" / "index.npy").exists()


def make_tie_change(src: Path, out_dir: Path) -> dict:
    """A node moved (~20 m) on a way that two or more area relations with features share as their last
    member way (osmium completes them there, in an order the patch must reproduce). Writes `new/<name>`
    and `change.osc.gz`."""
    from geoengine.tiles import schema

    ways: dict[int, list[int]] = {}
    rels = []
    for o in osmium.FileProcessor(str(src), osmium.osm.WAY | osmium.osm.RELATION):
        if o.is_way():
            ways[o.id] = [n.ref for n in o.nodes]
        elif o.tags.get("type") in ("multipolygon", "boundary"):
            tags = {k: v for k, v in dict(o.tags).items() if k != "type"}
            if schema.area_features(tags):  # (areas with features: their order shows in the tiles)
                rels.append((o.id, [m.ref for m in o.members if m.type == "w"]))
    at: dict[int, list[int]] = {}
    for rid, ms in rels:
        present = [w for w in ms if w in ways]
        if present:
            at.setdefault(max(present), []).append(rid)
    way = next(w for w, rs in sorted(at.items()) if len(rs) >= 2 and len(ways[w]) >= 3)
    node = ways[way][1]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "new").mkdir(exist_ok=True)
    new_path, osc_path = out_dir / "new" / src.name, out_dir / "change.osc.gz"
    h = osmium.io.Header()
    reader = osmium.io.Reader(str(src), osmium.osm.osm_entity_bits.NOTHING)
    h.add_box(reader.header().box())
    reader.close()
    full, change = osmium.SimpleWriter(str(new_path), header=h), osmium.SimpleWriter(str(osc_path))
    try:
        for o in osmium.FileProcessor(str(src)):
            if o.is_node() and o.id == node:
                n = o.replace(version=o.version + 1, timestamp=WHEN2, changeset=3, uid=1, user="geoengine-test",
                              location=(o.location.lon + 0.0002, o.location.lat + 0.0001))
                full.add_node(n)
                change.add_node(n)
            else:
                full.add(o)
    finally:
        full.close()
        change.close()
    return {"new": new_path, "osc": osc_path, "way": way, "relations": at[way]}


def test_relations_completing_at_one_way_keep_osmium_order(old_bundle, edits, upd_settings, tmp_path, monkeypatch):
    _no_extracts(monkeypatch)
    monkeypatch.setattr(tile_stage, "PATCH_MAX_SHARE", 1.0)
    tie = make_tie_change(edits["old"], tmp_path / "tie")
    assert len(tie["relations"]) >= 2
    r = _update_and_full(old_bundle, tie["new"], tie["osc"], upd_settings, tmp_path)
    assert "tiles" in r["result"]["stages_patched"], r["result"]
    assert r["entry"]["info"]["patch"]["objects"]["r"] >= 2
    assert _assert_same_archive(r["out"], r["full"], old_bundle) > 0


def test_the_slim_patch_array_paths_equal_their_python_definitions(old_bundle):
    """slim.py's array paths on the Liechtenstein bundle's kept collection, against the plain Python they
    replace: the kept ways holding some nodes (a Numba hash lookup), the relations holding some ways and
    nodes and the way each relation completes at (slim.Members), and the kept ways after a change that
    deletes, replaces and adds ways (one Numba merge)."""
    import numpy as np

    from geoengine.tiles import slim

    old = slim.Old(Path(os.path.realpath(old_bundle)) / "tiles" / "collection")
    rng = np.random.default_rng(29)
    refs = np.asarray(old.refs)
    nodes = np.unique(np.concatenate([rng.choice(refs, 300), [refs.max() + 1, 1]]))
    assert np.array_equal(slim._where_in(refs, nodes), np.flatnonzero(np.isin(refs, nodes)))
    assert len(slim._where_in(refs, nodes)) >= 300
    # the relations' members
    mem = old.members
    rels = old.relations
    assert len(rels) > 20
    ways = set(rng.choice(old.wid, 400).tolist()) | {m[1] for r in list(rels.values())[:10] for m in r[1] if m[0] == "w"}
    nset = set(nodes.tolist()) | set([m[1] for r in rels.values() for m in r[1] if m[0] == "n"][:5])
    for typ, ids, t in ((1, ways, "w"), (0, nset, "n")):
        want = sorted(r for r, (_tags, ms) in rels.items() if any(m[0] == t and m[1] in ids for m in ms))
        got = mem.rids[mem.holding(typ, ids)].tolist()
        assert got == want and want
    assert mem.area.tolist() == [slim._area_relation(rels[r][0]) for r in mem.rids.tolist()]
    # the way each relation completes at, some member ways deleted and some ways created
    members_w = sorted({m[1] for r in rels.values() for m in r[1] if m[0] == "w"})
    gone = np.unique(rng.choice(members_w, 60))
    born = np.asarray([max(members_w) + 5], dtype=np.int64)
    present = (set(old.wid.tolist()) - set(gone.tolist())) | set(born.tolist())
    ids = np.asarray(sorted(rels) + [max(rels) + 1], dtype=np.int64)
    got_ids, w, place = slim._completing(mem, ids, old, gone, born)
    want = [slim._completing_way(rels[r][1], present) if r in rels else (-1, 0) for r in ids.tolist()]
    assert list(zip(w.tolist(), place.tolist(), strict=True)) == want
    assert sum(1 for x in want if x[0] >= 0) > 20 and any(x[1] > 0 for x in want)
    # the kept ways after a change: deleted, replaced (other refs), created
    sel = rng.choice(len(old.wid), 200, replace=False)
    uid = np.unique(np.concatenate([old.wid[sel], [old.wid.max() + 3, old.wid.max() + 9], [1]]))
    live = rng.random(len(uid)) < 0.6
    lens = np.where(live, rng.integers(2, 6, len(uid)), 0)
    uoff = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    urefs = rng.integers(1, 10**9, int(uoff[-1])).astype(np.int64)
    wid, off, newrefs = slim._merge_ways(old.wid, old.off, refs, uid, uoff, urefs, live)
    d = {int(w): (int(old.off[k]), int(old.off[k + 1])) for k, w in enumerate(old.wid)}
    for u in uid.tolist():
        d.pop(u, None)
    ks = sorted(set(d) | {u for k, u in enumerate(uid.tolist()) if live[k]})
    assert wid.tolist() == ks
    upd = {u: urefs[uoff[k]:uoff[k + 1]] for k, u in enumerate(uid.tolist()) if live[k]}
    want_refs = np.concatenate([upd[w] if w in upd else refs[d[w][0]:d[w][1]] for w in ks])
    assert np.array_equal(newrefs, want_refs)
    assert np.array_equal(np.diff(off), [len(upd[w]) if w in upd else d[w][1] - d[w][0] for w in ks])
