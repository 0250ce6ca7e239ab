"""geoengine.search.opl: OPL lines of many nodes and way node lists at once, as the search patch's small
extract writes them; osmium reads them back to the same objects."""

from __future__ import annotations

import numpy as np
import osmium

from geoengine.search import opl


def _reference_coord(c: int) -> str:
    return f"{'-' if c < 0 else ''}{abs(c) // 10_000_000}.{abs(c) % 10_000_000:07d}"


def test_node_lines_and_ref_lists_read_back_through_osmium(tmp_path):
    rng = np.random.default_rng(29)
    ids = np.unique(rng.integers(1, 10**12, 600))[:500].astype(np.int64)
    xs = rng.integers(-1_800_000_000, 1_800_000_001, 500)
    ys = rng.integers(-900_000_000, 900_000_001, 500)
    xs[:4] = [0, -1, 9_999_999, -10_000_000]  # a point, a sign without an integer part, carries
    tags = {3: "name=A%20%b", 10: "amenity=cafe"}
    text = opl.node_lines(ids, xs, ys, tags).decode()
    lines = text.splitlines()
    assert len(lines) == 500
    for i in (0, 1, 2, 3, 3, 10, 499):
        t = tags.get(i, "")
        assert lines[i] == f"n{ids[i]} v1 T{t} x{_reference_coord(int(xs[i]))} y{_reference_coord(int(ys[i]))}"
    ends = np.array([0, 3, 3, 5])
    refs = np.array([5, 7, 11, -2, 10**15])
    assert opl.ref_lists(refs, ends) == ["n5,n7,n11", "", "n-2,n1000000000000000"]
    path = tmp_path / "x.opl"
    path.write_bytes(text.encode() + b"w1 v1 T N" + opl.ref_lists(ids[:3], np.array([0, 3]))[0].encode() + b"\n")
    got = {}
    for o in osmium.FileProcessor(str(path)):
        if o.is_node():
            got[o.id] = (o.location.x, o.location.y, dict(o.tags))
        else:
            assert [n.ref for n in o.nodes] == ids[:3].tolist()
    assert list(got) == ids.tolist()
    for i in range(500):
        x, y, t = got[int(ids[i])]
        assert (x, y) == (int(xs[i]), int(ys[i]))
    assert got[int(ids[3])][2] == {"name": "A b"} and got[int(ids[10])][2] == {"amenity": "cafe"}
