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


_FORESEEN = """
import json, sys, time
from pathlib import Path
from geoengine.bundle import Bundle
from geoengine.bundler.middle import Store
from geoengine.bundler.pipeline import BuildInputs, PatchInputs, Stage, StageResult, build
from geoengine.bundler.source import STAGE as SOURCE
from geoengine.bundler.update import apply_changes, read_changes
from geoengine.bundler import pipeline
from geoengine.config import Settings
from geoengine.progress import Progress

old_path, osc, new, home, guess, log = (Path(a) for a in sys.argv[1:7])
pipeline.STAGE_VERSIONS["boxed"] = 1

def boxed_patch(ctx, p):
    with open(log, "a") as fh:
        fh.write(json.dumps({"bbox": list(ctx.bbox), "t": time.time()}) + "\\n")
    (ctx.stage_dir("boxed") / "bbox").write_text(json.dumps(list(ctx.bbox)))
    return StageResult(outputs=["boxed/bbox"], counts={"n": 1})

def slow_source_patch(ctx, p):
    time.sleep(0.5)
    r = SOURCE.patch(ctx, p)
    with open(log, "a") as fh:
        fh.write(json.dumps({"source_done": time.time()}) + "\\n")
    return r

stages = [Stage(name="source", run=SOURCE.run, patch=slow_source_patch, isolated=True, needs=SOURCE.needs),
          Stage(name="boxed", run=boxed_patch, patch=boxed_patch, isolated=True, needs=("input:osm", "bbox"))]
old = Bundle.open(old_path)
settings = Settings(home=home)
changes = read_changes([osc])
apply_changes(old.path / "source" / "extract.osm.pbf", [osc], new, {})
bbox = json.loads(guess.read_text())
patch = PatchInputs(old=old, old_extract=old.path / "source" / "extract.osm.pbf", new_extract=new, files=(osc,),
                    changes=changes, osc=changes.osc, store=Store.open(old.path / "source" / "store"),
                    bbox=tuple(bbox) if bbox else None)
lines = []
class P(Progress):
    def log(self, m):
        lines.append(m)
out = old_path.parent / "new"
build(BuildInputs(osm=new), out, settings, stages=stages, reuse=old, patch=patch, progress=P(quiet=True))
print(json.dumps({"lines": lines, "bbox": json.loads((out / "boxed" / "bbox").read_text()),
                  "source_bbox": Bundle.open(out).stages["source"]["info"]["bbox"]}))
"""


def _foreseen(old_bundle, edits, tmp_path, guess) -> tuple[dict, list]:
    from .conftest import linked_copy

    old = linked_copy(old_bundle, tmp_path / "old")
    (tmp_path / "guess.json").write_text(json.dumps(guess))
    args = [str(old), str(edits["osc"]), str(tmp_path / "new.osm.pbf"), str(tmp_path / "home"),
            str(tmp_path / "guess.json"), str(tmp_path / "log.jsonl")]
    run = subprocess.run([sys.executable, "-c", _FORESEEN, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stderr[-3000:]
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    return json.loads(run.stdout.strip().splitlines()[-1]), log


def test_a_stage_that_reads_the_bbox_is_patched_before_the_source_stage_ends(old_bundle, edits, tmp_path):
    """With the bbox foreseen (PatchInputs.bbox, update.foreseen_bbox), a patch that reads only the bbox of
    the source stage starts beside it; a wrong guess is caught when the source stage reports its bbox, and
    the patch runs again with the right one."""
    right = geoengine.bundle.Bundle.open(old_bundle).stages["source"]["info"]["bbox"]  # a header's box
    r, log = _foreseen(old_bundle, edits, tmp_path / "right", right)
    done = next(e["source_done"] for e in log if "source_done" in e)
    (started,) = [e for e in log if "bbox" in e]
    assert started["t"] < done and started["bbox"] == right == r["bbox"] == r["source_bbox"]
    assert not any("started again" in line for line in r["lines"])
    wrong = [right[0] - 0.5, *right[1:]]
    r, log = _foreseen(old_bundle, edits, tmp_path / "wrong", wrong)
    seen = [e["bbox"] for e in log if "bbox" in e]
    assert seen[0] == wrong and seen[-1] == right == r["bbox"]  # started again with the source stage's
    assert any("[boxed] started again" in line for line in r["lines"])
