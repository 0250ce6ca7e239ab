"""Writing the index: the build stage's `release=True` (each DocSet column dropped after its last use, to
lower the stage's peak) writes the same files as keeping every column."""

from __future__ import annotations

import hashlib

from tests.conftest import data_file


def test_release_writes_the_same_files(tmp_path):
    from geoengine.search.documents import build_documents
    from geoengine.search.write import write_index

    ds, _ = build_documents(data_file("andorra/andorra.osm.pbf"))
    kept, released = tmp_path / "kept", tmp_path / "released"
    kept.mkdir()
    released.mkdir()
    files_a, counts_a = write_index(kept, ds)
    files_b, counts_b = write_index(released, ds, release=True)
    assert files_a == files_b and counts_a == counts_b and counts_a["documents"] > 1_000
    for f in files_a:
        assert hashlib.sha256((kept / f).read_bytes()).digest() == hashlib.sha256((released / f).read_bytes()).digest(), f
    assert ds.names is None and ds.display_name is None  # released
