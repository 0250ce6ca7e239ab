"""The tile patch's splice (geoengine/tiles/splice.py): a tile's bytes decode into raw pieces that frame
again to the same bytes (every tile of real builds, all zooms), and the seq lists a full build keeps name
exactly each tile's features (the tile made again from the kept collection's features of those seqs
alone is the tile). The update tests (tests/update/test_update_tiles.py) check that spliced archives
equal full builds'."""

from __future__ import annotations

import gzip
import pickle
import sqlite3

import numpy as np
import pytest
import shapely

from geoengine.tiles import kept as K
from geoengine.tiles import mvt, schema, splice
from geoengine.tiles import spool as S
from geoengine.tiles import tiler as T


def _archive(bundle) -> dict[tuple[int, int, int], bytes]:
    (path,) = (bundle / "tiles").glob("*.mbtiles")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return {(z, x, (1 << z) - 1 - r): bytes(d) for z, x, r, d in
                db.execute("SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles")}


@pytest.mark.parametrize("region", ["liechtenstein", "andorra"])
def test_every_tile_decodes_and_frames_again_to_its_bytes(build_region, region):
    tiles = _archive(build_region(region))
    assert len(tiles) > 100 and set(range(2, 15)) <= {z for z, _, _ in tiles}
    bad = []
    for k, d in tiles.items():
        raw = gzip.decompress(d)
        if splice.reframe(raw) != raw:
            bad.append(k)
    assert not bad, f"{len(bad)} of {len(tiles)} tiles frame again to other bytes, e.g. {bad[:5]}"


@pytest.mark.parametrize("region", ["liechtenstein", "andorra"])
def test_the_kept_seq_lists_name_each_tiles_features(build_region, region):
    bundle = build_region(region)
    folder = bundle / "tiles" / K.FOLDER
    kept = splice.Kept.load(folder)
    assert kept is not None
    tiles = _archive(bundle)
    keys = {(k >> 56, (k >> 28) & 0xFFFFFFF, k & 0xFFFFFFF) for k in kept.key.tolist()}
    assert keys == set(tiles)  # one list per tile of the archive
    assert (np.diff(kept.key) > 0).all()
    recs = {r[0]: r for r in K.load_pickle(folder / "shared.pkl")}
    for path in (folder / "parts").glob("*.features"):
        with open(path, "rb") as fh:
            while True:
                try:
                    recs.update((r[0], r) for r in pickle.load(fh))
                except EOFError:
                    break
    n_zero = 0
    for row, k in enumerate(kept.key.tolist()):
        z, x, y = k >> 56, (k >> 28) & 0xFFFFFFF, k & 0xFFFFFFF
        ent = kept.entries(row)
        n_zero += int((ent < 0).sum())
        seqs = np.where(ent >= 0, ent, -1 - ent)
        rs = [recs[s] for s in seqs.tolist()]
        geoms = shapely.from_wkb([r[1] for r in rs])
        T._STATE = S._state_of([(r[0], g, r[2], r[3], r[4]) for r, g in zip(rs, geoms, strict=True)], T.MAXZOOM)
        try:
            out = T._encode_batch((z, [(x, y)]))
        finally:
            T._STATE = {}
        assert len(out) == 1, (z, x, y)
        _, _, _, data, (got, mixed) = out[0]
        assert data == tiles[(z, x, y)], (z, x, y)
        assert np.array_equal(got, ent), (z, x, y)
        assert bool(mixed) == bool(kept.mixed[row])


def test_a_value_entry_standing_for_values_encoded_otherwise_is_mixed():
    """1 and 1.0 are one entry of a layer's values (the first one's bytes): the tile is "mixed", and the
    splice, which rebuilds the tables from the entries it reads, says so too."""
    pt = np.array([shapely.Point(1, 2), shapely.Point(3, 4)], dtype=object)
    for props, want in (([{"a": 1}, {"a": 1.0}], True), ([{"a": 1}, {"a": 2.0}], False),
                        ([{"a": True}, {"a": 1}], False), ([{"a": "x"}, {"a": "x"}], False)):
        flags: list = []
        data = mvt.encode_tile(["pois"], np.array([0, 2]), pt, np.array([0, 0]), np.arange(2), mvt.TagTable(props),
                               flags=flags)
        assert flags == [want], props
        # each feature alone (not mixed), spliced together: the same bytes, the same flag
        one = [mvt.encode_tile(["pois"], np.array([0, 1]), pt[i:i + 1], np.array([0]), np.arange(1),
                               mvt.TagTable([props[i]])) for i in range(2)]
        a, b = splice.decode(one[0]), splice.decode(one[1])
        P = np.array([schema.LAYERS.index("pois")])
        res = splice.splice_one(gzip.compress(one[0]), np.array([10]), P, np.array([True]),
                                (gzip.compress(one[1]), np.array([20]), P))
        assert a is not None and b is not None and res is not None
        assert gzip.decompress(res[0]) == data and res[2] == want, props
