"""Build accounting: the PBF block scanner agrees with osmium on real extracts, and every build step
is measured (wall, CPU, peak RSS, output size) into the manifest and `geoengine build --report`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geoengine.bundler.measure import StepMeter, reset_peak
from geoengine.bundler.pbfscan import packed_sint64, scan_pbf
from geoengine.bundler.source import _Counter, describe_extract

from .conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
EXTRACTS = ["liechtenstein/valhalla-liechtenstein-latest.osm.pbf", "andorra/andorra.osm.pbf",
            "helsinki/helsinki.osm.pbf"]


def _encode_sint64(values) -> bytes:
    out = bytearray()
    for v in values:
        u = (v << 1) ^ (v >> 63)  # zigzag
        u &= (1 << 64) - 1
        while True:
            b = u & 0x7F
            u >>= 7
            if u:
                out.append(b | 0x80)
            else:
                out.append(b)
                break
    return bytes(out)


@settings(deadline=None)
@given(st.lists(st.integers(min_value=-(1 << 62), max_value=(1 << 62)), max_size=200))
def test_packed_sint64_decodes_what_protobuf_encodes(values):
    assert packed_sint64(_encode_sint64(values)).tolist() == values


@pytest.mark.parametrize("rel", EXTRACTS)
def test_scan_agrees_with_osmium(rel):
    path = SHARED_DATA / rel
    counter = _Counter()
    counter.apply_file(str(path))
    scan = scan_pbf(path)
    assert scan == {"nodes": counter.nodes, "ways": counter.ways, "relations": counter.relations,
                    "bbox": [counter.min_lon, counter.min_lat, counter.max_lon, counter.max_lat]}


def test_scan_declines_what_it_does_not_read(tmp_path):
    assert scan_pbf(SHARED_DATA / "monaco" / "monaco.osm.gz") is None  # XML: osmium reads it
    bad = tmp_path / "bad.osm.pbf"
    bad.write_bytes(b"\x00\x00\x00\x0dnot a header at all")
    assert scan_pbf(bad) is None
    # the source stage still describes such files, through osmium
    desc = describe_extract(SHARED_DATA / "monaco" / "monaco.osm.gz")
    assert desc["counts"]["nodes"] > 10_000 and desc["bbox_from"] == "nodes"


def test_step_meter_sees_a_step_s_own_peak():
    reset_peak()
    with StepMeter() as m:
        block = np.ones(64 << 20, dtype=np.uint8)  # 64 MiB touched
        block.sum()
    r = m.record()
    del block
    assert r["peak_rss_mb"] - r["rss_start_mb"] >= 60
    with StepMeter() as m2:
        sum(range(1000))
    # the next step's peak starts from its own start, not from the earlier 64 MiB
    assert m2.record()["peak_rss_mb"] < r["peak_rss_mb"] - 30


def test_cli_build_report_accounts_for_every_step(tmp_path):
    pbf = SHARED_DATA / "liechtenstein" / "valhalla-liechtenstein-latest.osm.pbf"
    report = tmp_path / "report.json"
    env = {"GEOENGINE_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    import os

    if os.environ.get("NUMBA_CACHE_DIR"):
        env["NUMBA_CACHE_DIR"] = os.environ["NUMBA_CACHE_DIR"]
    p = subprocess.run([sys.executable, "-m", "geoengine", "build", str(pbf), "--out", str(tmp_path / "b"),
                        "--quiet", "--report", str(report)], capture_output=True, text=True, env=env, timeout=1800)
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads(report.read_text())
    steps = rep["steps"]
    assert list(steps)[:4] == ["startup", "load_stages", "inputs", "source"]
    assert {"graph", "routing", "search", "tiles", "manifest", "publish"} <= set(steps)
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    for name in ("source", "graph", "routing", "search", "tiles"):
        cost = manifest["stages"][name]["cost"]
        assert cost == steps[name]
        assert cost["seconds"] > 0 and cost["cpu_seconds"] >= 0 and cost["peak_rss_mb"] > 0
        on_disk = sum(f.stat().st_size for f in (tmp_path / "b" / name).rglob("*") if f.is_file())
        assert cost["output_bytes"] == on_disk
    # the named steps cover the process's life up to the report: what is left is small
    named = sum(s["seconds"] for k, s in steps.items() if k != "remove_replaced_version")  # inside publish
    assert named <= rep["process_seconds"] + 0.5
    assert rep["process_seconds"] - named < 0.05 * rep["process_seconds"] + 1.5
