"""The new extract is written beside the stages (geoengine.bundler.update._ApplyBeside): no stage patch
reads it, so `geoengine update` starts the stages at once and the build waits for the file only to run a
stage in full and to publish. Run in a fresh process (a pytest worker whose Numba parallel layer has
started may not fork, and then applies first, as before)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import geoengine
from geoengine.bundler.update import _ApplyBeside, update

from .conftest import publish_copy
from .test_update import _objects

ROOT = Path(__file__).resolve().parents[2]

_CASE = """
import json, sys
from pathlib import Path
from geoengine.bundler import update as U
from geoengine.config import Settings
if sys.argv[3] == "fail":
    def broken(*a, **k):
        raise RuntimeError("no space left on device")
    U.apply_changes = broken
report = {}
try:
    U.update(Path(sys.argv[1]), Settings(home=Path(sys.argv[4])), diffs=[Path(sys.argv[2])], report=report)
    print(json.dumps({"report": report}))
except U.UpdateError as exc:
    print(json.dumps({"error": str(exc), "report": report}))
"""


def _fresh(out: Path, osc: Path, how: str, home: Path) -> dict:
    run = subprocess.run([sys.executable, "-c", _CASE, str(out), str(osc), how, str(home)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_extract_written_beside_the_stages_is_the_one_written_first(old_bundle, edits, upd_settings, tmp_path,
                                                                         monkeypatch):
    beside = publish_copy(old_bundle, tmp_path / "beside")
    r = _fresh(beside, edits["osc"], "ok", upd_settings.home)
    step = r["report"]["steps"]["apply"]
    assert step["beside_stages"] and step["cpu_seconds"] > 0
    assert r["report"]["stages_patched"] == ["source", "graph", "routing", "search", "tiles"]
    # the same update with the extract written first (a process that may not fork)
    monkeypatch.setattr(_ApplyBeside, "start", classmethod(lambda cls, *a: None))
    first = publish_copy(old_bundle, tmp_path / "first")
    report: dict = {}
    update(first, upd_settings, diffs=[edits["osc"]], report=report)
    assert "beside_stages" not in report["steps"]["apply"]
    a, b = (geoengine.bundle.Bundle.open(p) for p in (beside, first))
    assert _objects(beside / "source" / "extract.osm.pbf") == _objects(edits["new"])
    assert (beside / "source" / "extract.osm.pbf").read_bytes() == (first / "source" / "extract.osm.pbf").read_bytes()
    assert (a.stages["source"]["counts"], a.stages["source"]["info"]) == \
        (b.stages["source"]["counts"], b.stages["source"]["info"])
    assert (beside / "source" / "extract.json").read_text() == (first / "source" / "extract.json").read_text()
    assert a.manifest["data_timestamp"] == b.manifest["data_timestamp"]
    # the input's size is the written file's; its content is named by the old extract and the change
    (doc,) = [d for d in a.manifest["inputs"] if d["role"] == "osm"]
    assert doc["size"] == (beside / "source" / "extract.osm.pbf").stat().st_size
    assert doc["sha256"] is None and len(doc["derived_sha256"]) == 64
    # the patched stages' outputs equal those of the update that wrote the extract first
    for stage in ("graph", "search"):
        files = sorted(p.relative_to(first) for p in (first / stage).rglob("*") if p.is_file())
        assert files and files == sorted(p.relative_to(beside) for p in (beside / stage).rglob("*") if p.is_file())
        for f in files:
            assert (beside / f).read_bytes() == (first / f).read_bytes(), f


def test_an_extract_that_cannot_be_written_fails_the_update_and_publishes_nothing(old_bundle, edits, upd_settings,
                                                                                  tmp_path):
    out = publish_copy(old_bundle, tmp_path)
    before = os.path.realpath(out)
    r = _fresh(out, edits["osc"], "fail", upd_settings.home)
    assert r["error"].startswith("the change files could not be applied to the extract")
    assert "no space left on device" in r["error"]
    assert os.path.realpath(out) == before and (out / "manifest.json").exists()
    assert not (out.parent / f".{out.name}.update").exists()
