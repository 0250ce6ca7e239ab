"""OpenLR line references: the binary format against published vectors, and per-edge references of real
routes decoding back to the route's nodes."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from geoengine.geo import haversine_m
from geoengine.routing.openlr import decode, edge_references, encode_lines, route_linear_references
from geoengine.services.models import Location

from .conftest import ANDORRA

# Published examples (OpenLR white paper 1.5 and the test vectors of the openlr-go encoder): inputs and
# the expected base64 of two-point line locations.
VECTORS_2 = [
    # (lon0, lat0, frc0, fow0, bear0, lfrcnp, dnp, lon1, lat1, frc1, fow1, bear1, poff, noff, expected)
    (0.6752192, 47.3651611, 3, 4, 28, 3, 498, 0.6769992, 47.3696011, 3, 2, 197, 0.0, 0.45898438,
     "CwB67CGukRxiCACyAbwaMXU="),
    (9.9750602, 48.0632865, 1, 3, 298, 1, 88, 9.9750602, 48.0632865, 1, 3, 298, 0.0, 0.0, "CwcX6CItqAs6AQAAAAALGg=="),
]
# three-point examples (decoded and compared with their inputs)
VECTORS_3 = [
    ("CwRbWyNG9RpsCQCb/jsbtAT/6/+jK1lE", [(6.1268198, 49.6085178, 3, 2, 141, 557), (6.1283698, 49.6039878, 3, 3, 231, 264),
                                          (6.1281598, 49.6030578, 5, 3, 287, None)], 0.26757812, 0.0),
]


@pytest.mark.parametrize("v", VECTORS_2)
def test_encode_matches_published_vectors(v):
    lon0, lat0, frc0, fow0, b0, lfrcnp, dnp, lon1, lat1, frc1, fow1, b1, poff, noff, expected = v
    raw = encode_lines([lon0], [lat0], [lon1], [lat1], [frc0], [fow0], [b0], [lfrcnp], [dnp], [frc1], [fow1], [b1],
                       [poff], [noff])[0]
    assert base64.b64encode(raw).decode() == expected


@pytest.mark.parametrize("text, points, poff, noff", VECTORS_3)
def test_decode_three_point_vector(text, points, poff, noff):
    d = decode(text)
    assert len(d["points"]) == 3
    for got, (lon, lat, frc, fow, bear, dnp) in zip(d["points"], points, strict=True):
        assert got["lon"] == pytest.approx(lon, abs=2e-5) and got["lat"] == pytest.approx(lat, abs=2e-5)
        assert got["frc"] == frc and got["fow"] == fow
        assert abs(got["bearing"] - bear) <= 11.25 / 2 + 1e-9
        if dnp is not None:
            assert abs(got["dnp"] - dnp) <= 58.6 / 2 + 1e-9
    assert d["poff"] == pytest.approx(poff, abs=1 / 256) and d["noff"] == pytest.approx(noff, abs=1 / 256)


def test_route_references_decode_to_route_nodes(andorra):
    router = andorra.router
    prof = router.profile("auto")
    a, b = ANDORRA["andorra_la_vella"], ANDORRA["canillo"]
    cands, pieces = router.route_legs(prof, [Location(lon=a[0], lat=a[1]), Location(lon=b[0], lat=b[1])])
    refs = route_linear_references(router, prof, pieces)
    edges = np.concatenate([p.edges for p in pieces])
    assert len(refs) == len(edges)
    g = andorra.graph
    src, dst = np.asarray(g.edge_src)[edges], np.asarray(g.edge_dst)[edges]
    lon, lat = np.asarray(g.node_lon), np.asarray(g.node_lat)
    length = np.asarray(g.edge_length)[edges]
    for k, ref in enumerate(refs):
        d = decode(ref)
        p0, p1 = d["points"]
        assert haversine_m(p0["lat"], p0["lon"], lat[src[k]], lon[src[k]]) < 3.0  # 24-bit: 2.1e-5 degrees
        assert haversine_m(p1["lat"], p1["lon"], lat[dst[k]], lon[dst[k]]) < 4.0
        assert abs(p0["dnp"] - min(length[k], 255.5 * 58.6)) <= 58.6 / 2 + 1e-6
    # offsets only on the first and the last edge, matching where the route starts and ends on them
    first, last = decode(refs[0]), decode(refs[-1])
    assert first["poff"] == pytest.approx(pieces[0].f_first, abs=1 / 256)
    assert last["noff"] == pytest.approx(1 - pieces[-1].f_last, abs=1 / 256)
    assert all(decode(r)["poff"] == 0 and decode(r)["noff"] == 0 for r in refs[1:-1])
    # the main road of the valley (CG-2, a primary/trunk road) has a low FRC somewhere
    assert min(decode(r)["points"][0]["frc"] for r in refs) <= 2


def test_single_edge_offsets_leave_a_location(andorra):
    g = andorra.graph
    refs = edge_references(g, [0], 0.6, 0.4)
    d = decode(refs[0])
    assert d["poff"] + d["noff"] < 1.0
