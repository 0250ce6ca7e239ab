"""The build pipeline on real data: manifest, atomic publication, --continue, failures that never
touch a published bundle, and bundle loading that names what is wrong."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import geoengine
from geoengine.bundle import STAGE_VERSIONS, Bundle
from geoengine.bundler.pipeline import BuildInputs, Stage, StageResult, build, resolve_inputs
from geoengine.bundler.source import STAGE as SOURCE
from geoengine.config import Settings
from geoengine.errors import BuildError, BundleError, InvalidRequest

from .conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tmp_settings(tmp_path):
    return Settings(home=tmp_path / "home", data_mirror=str(SHARED_DATA))


def andorra_inputs(settings) -> BuildInputs:
    return resolve_inputs("andorra", settings)


def test_source_stage_manifest(tmp_path, tmp_settings):
    out = build(andorra_inputs(tmp_settings), tmp_path / "b", tmp_settings, stages=[SOURCE])
    m = json.loads((out / "manifest.json").read_text())
    assert m["format"] == "geoengine-bundle" and m["geoengine_version"] == geoengine.__version__
    assert m["region"] == "andorra"
    # The header bbox of the extract (see ../shared/data/README.md).
    assert m["bbox"] == pytest.approx([1.4221, 42.4351, 1.7804, 42.6572], abs=1e-3)
    roles = [i["role"] for i in m["inputs"]]
    assert roles.count("osm") == 1 and roles.count("dem") == 2 and "places" in roles
    osm = m["inputs"][0]
    assert osm["sha256"] == "70998b72b5eed4b6a8565837b3d72c3b592c4dc4f1a7d5e964367d20508f188b"
    src = m["stages"]["source"]
    assert src["counts"] == {"nodes": 69644, "ways": 2725, "relations": 74}
    assert src["version"] == STAGE_VERSIONS["source"] and "source/extract.json" in src["outputs"]
    assert {"numpy", "numba", "osmium", "python"} <= set(m["versions"])
    assert m["timings"]["total_seconds"] >= m["timings"]["source"] >= 0


def test_osm_without_header_bbox_gets_bbox_from_nodes(tmp_path, tmp_settings):
    inputs = resolve_inputs(str(SHARED_DATA / "monaco" / "monaco.osm.gz"), tmp_settings)
    out = build(inputs, tmp_path / "monaco", tmp_settings, stages=[SOURCE])
    m = Bundle.open(out).manifest
    lon0, lat0, lon1, lat1 = m["bbox"]
    assert 7.38 < lon0 < lon1 < 7.51 and 43.51 < lat0 < lat1 < 43.76


def test_rebuild_switches_atomically_and_drops_the_old_version(tmp_path, tmp_settings):
    out = tmp_path / "b"
    build(andorra_inputs(tmp_settings), out, tmp_settings, stages=[SOURCE])
    first = out.resolve()
    engine = geoengine.open(out)
    build(andorra_inputs(tmp_settings), out, tmp_settings, stages=[SOURCE])
    second = out.resolve()
    assert out.is_symlink() and first != second and not first.exists()
    assert Bundle.open(out).manifest["stages"]["source"]
    assert engine.info()["region"] == "andorra"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".b.") and p.resolve() != second]
    assert leftovers == [".b.lock"]


def _failing(name):
    def run(ctx):
        (ctx.stage_dir(name) / "half-written").write_text("x")
        raise RuntimeError("disk on fire")

    return Stage(name=name, run=run)


def test_failed_build_keeps_published_bundle_and_continue_resumes(tmp_path, tmp_settings, monkeypatch):
    monkeypatch.setitem(STAGE_VERSIONS, "extra", 1)
    out = tmp_path / "b"
    build(andorra_inputs(tmp_settings), out, tmp_settings, stages=[SOURCE])
    published = out.resolve()
    calls = []

    def counting_source(ctx):
        calls.append("source")
        return SOURCE.run(ctx)

    source = Stage(name="source", run=counting_source)
    with pytest.raises(BuildError, match="stage 'extra' failed: RuntimeError: disk on fire"):
        build(andorra_inputs(tmp_settings), out, tmp_settings, stages=[source, _failing("extra")])
    assert out.resolve() == published and (published / "manifest.json").exists()
    assert "extra" not in Bundle.open(out).stages

    def ok(ctx):
        (ctx.stage_dir("extra") / "data.txt").write_text("ok")
        return StageResult(outputs=["extra/data.txt"], counts={"things": 1})

    build(andorra_inputs(tmp_settings), out, tmp_settings, stages=[source, Stage("extra", ok)], resume=True)
    assert calls == ["source"], "--continue must not rerun the finished source stage"
    b = Bundle.open(out)
    assert b.stages["extra"]["counts"] == {"things": 1}
    assert not (b.path / "extra" / "half-written").exists()


def test_continue_starts_over_when_inputs_changed(tmp_path, tmp_settings, monkeypatch):
    monkeypatch.setitem(STAGE_VERSIONS, "extra", 1)
    out = tmp_path / "b"
    with pytest.raises(BuildError):
        build(andorra_inputs(tmp_settings), out, tmp_settings, stages=[SOURCE, _failing("extra")])
    assert not out.exists()
    monaco = resolve_inputs(str(SHARED_DATA / "monaco" / "monaco.osm.gz"), tmp_settings)
    build(monaco, out, tmp_settings, stages=[SOURCE], resume=True)
    assert Bundle.open(out).manifest["inputs"][0]["path"].endswith("monaco.osm.gz")


def test_bad_targets_are_clear(tmp_settings):
    with pytest.raises(InvalidRequest, match="neither an OSM extract file nor a known region"):
        resolve_inputs("atlantis", tmp_settings)
    with pytest.raises(InvalidRequest, match="does not exist"):
        resolve_inputs("/nowhere/x.osm.pbf", tmp_settings)
    with pytest.raises(InvalidRequest, match="DEM file"):
        resolve_inputs("andorra", tmp_settings, dem=["/nowhere/N42E001.hgt"])


@pytest.fixture
def built(tmp_path, tmp_settings):
    return build(andorra_inputs(tmp_settings), tmp_path / "b", tmp_settings, stages=[SOURCE]).resolve()


def _edit_manifest(path, fn):
    m = json.loads((path / "manifest.json").read_text())
    fn(m)
    (path / "manifest.json").write_text(json.dumps(m))


def test_open_names_what_is_missing_or_incompatible(tmp_path, built):
    with pytest.raises(BundleError, match="does not exist"):
        geoengine.open(tmp_path / "nothing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BundleError, match="no manifest.json"):
        geoengine.open(empty)

    os.remove(built / "source" / "extract.json")
    with pytest.raises(BundleError, match="stage 'source' output source/extract.json is missing"):
        geoengine.open(built)
    (built / "source" / "extract.json").write_text("{}")

    _edit_manifest(built, lambda m: m.update(format_version=99, geoengine_version="9.9.9"))
    with pytest.raises(BundleError, match=r"format version 99 \(built by geoengine 9.9.9\)"):
        geoengine.open(built)
    _edit_manifest(built, lambda m: m.update(format_version=1))

    _edit_manifest(built, lambda m: m["stages"]["source"].update(version=7))
    with pytest.raises(BundleError, match="stage 'source' .* format 7 .* rebuild"):
        geoengine.open(built)
    _edit_manifest(built, lambda m: m["stages"]["source"].update(version=1))

    _edit_manifest(built, lambda m: m["stages"].update(hologram={"version": 1, "outputs": []}))
    with pytest.raises(BundleError, match="'hologram' stage that this geoengine does not know"):
        geoengine.open(built)

    (built / "manifest.json").write_text("{not json")
    with pytest.raises(BundleError, match="cannot be read"):
        geoengine.open(built)


def test_cli_build_and_info(tmp_path, monkeypatch, capsys):
    from geoengine.cli import main

    monkeypatch.setenv("GEOENGINE_HOME", str(tmp_path))
    monkeypatch.setenv("GEOENGINE_DATA_MIRROR", str(SHARED_DATA))
    out = tmp_path / "mon"
    assert main(["build", str(SHARED_DATA / "monaco" / "monaco.osm.gz"), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out.absolute())
    assert "[source] started" in captured.err and "[source] done" in captured.err
    assert main(["info", str(out)]) == 0
    assert "stage    source" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "none")]) == 1
    assert "does not exist" in capsys.readouterr().err


def _counting_stage(name, calls, patch_answer):
    """A stage whose output is the osm input's size; its `patch` answers with `patch_answer` (None:
    declines), writing a marker first so a declined patch's leftovers must be cleared."""

    def run(ctx):
        calls.append("run")
        size = ctx.inputs.osm.stat().st_size
        (ctx.stage_dir(name) / "size.txt").write_text(str(size))
        return StageResult(outputs=[f"{name}/size.txt"], counts={"bytes": size})

    def patch(ctx, p):
        calls.append(("patch", p.old_dir(name).name, p.old_entry(name).get("counts", {}).get("bytes")))
        (ctx.stage_dir(name) / "leftover").write_text("x")
        if patch_answer is None:
            return None
        (ctx.stage_dir(name) / "size.txt").write_text("patched")
        return StageResult(outputs=[f"{name}/size.txt"], counts={"bytes": patch_answer})

    return Stage(name=name, run=run, patch=patch)


@pytest.mark.parametrize("answer", [None, 7])
def test_an_update_tries_a_stage_patch_before_a_full_run(tmp_path, tmp_settings, monkeypatch, answer):
    from geoengine.bundler.pipeline import PatchInputs

    monkeypatch.setitem(STAGE_VERSIONS, "extra", 1)
    out = tmp_path / "b"
    calls: list = []
    first = andorra_inputs(tmp_settings)
    build(first, out, tmp_settings, stages=[_counting_stage("extra", calls, answer)])
    assert calls == ["run"]
    old = Bundle.open(out)
    other = BuildInputs(osm=SHARED_DATA / "monaco" / "monaco.osm.gz", region="andorra")
    patch = PatchInputs(old=old, old_extract=first.osm, new_extract=other.osm, files=(), changes=None)
    report: dict = {}
    calls.clear()
    build(other, out, tmp_settings, stages=[_counting_stage("extra", calls, answer)], reuse=old, patch=patch,
          report=report)
    entry = Bundle.open(out).stages["extra"]
    old_bytes = first.osm.stat().st_size
    if answer is None:  # declined: the full run, on a clean folder
        assert calls == [("patch", "extra", old_bytes), "run"]
        assert report["stages_rebuilt"] == ["extra"] and report["stages_patched"] == []
        assert entry["counts"] == {"bytes": other.osm.stat().st_size} and "patched_from" not in entry
        assert not (out / "extra" / "leftover").exists()
    else:
        assert calls == [("patch", "extra", old_bytes)]
        assert report["stages_patched"] == ["extra"] and report["stages_rebuilt"] == []
        assert entry["counts"] == {"bytes": 7} and entry["patched_from"] == old.path.name
        assert (out / "extra" / "size.txt").read_text() == "patched"
    # without change files a stage with a patch method runs in full, as before
    calls.clear()
    build(first, out, tmp_settings, stages=[_counting_stage("extra", calls, answer)], reuse=Bundle.open(out))
    assert calls == ["run"]


def _timed_stages(log, answer, slow_fails: bool = False, wait: bool = True):
    """An isolated stage `slow` that reads every earlier stage (no `needs`) and waits up to 20 s for the
    marker `quick`'s patch writes first, then `quick`, which names what it reads (the osm input) and has
    a patch answering `answer` (None: declines). Each writes "name start end" lines to `log` (the stages
    run in forked processes)."""
    import time as _t

    def note(what, t0):
        with open(log, "a") as fh:
            fh.write(f"{what} {t0} {_t.time()}\n")

    def slow(ctx):
        t0 = _t.time()
        marker = log.with_name("quick-started")
        while wait and not marker.exists() and _t.time() < t0 + 20:  # the early patch's marker
            _t.sleep(0.05)
        note("slow-run", t0)
        if marker.exists():
            note("slow-saw-quick", t0)
        if slow_fails:
            raise RuntimeError("slow failed")
        (ctx.stage_dir("slow") / "x").write_text("x")
        return StageResult(outputs=["slow/x"], counts={"n": 1})

    def quick_run(ctx):
        t0 = _t.time()
        (ctx.stage_dir("quick") / "y").write_text("run")
        note("quick-run", t0)
        return StageResult(outputs=["quick/y"], counts={"n": 2})

    def quick_patch(ctx, p):
        t0 = _t.time()
        log.with_name("quick-started").write_text("x")
        ctx.progress.log("[quick] a line from the early patch")
        (ctx.stage_dir("quick") / "leftover").write_text("x")
        _t.sleep(0.3)
        note("quick-patch", t0)
        if answer is None:
            return None
        (ctx.stage_dir("quick") / "y").write_text("patched")
        return StageResult(outputs=["quick/y"], counts={"n": answer})

    return [Stage(name="slow", run=slow, isolated=True),
            Stage(name="quick", run=quick_run, patch=quick_patch, isolated=True, needs=("input:osm",))]


def early_case(root: str, answer, slow_fails: bool = False) -> dict:
    """The early-patch case, run in a fresh process (`_in_fresh_process`): a process whose numba parallel
    layer has started (an earlier test's kernels) may not fork, and the update then patches in place."""
    import io

    from geoengine.bundler.isolate import fork_safe
    from geoengine.bundler.pipeline import PatchInputs
    from geoengine.progress import Progress

    root = Path(root)
    settings = Settings(home=root / "home", data_mirror=str(SHARED_DATA))
    for name in ("slow", "quick"):
        STAGE_VERSIONS[name] = 1
    out, log = root / "b", root / "times.txt"
    first = andorra_inputs(settings)
    build(first, out, settings, stages=_timed_stages(log, answer, wait=False))
    log.unlink()
    old = Bundle.open(out)
    before = os.path.realpath(out)
    other = BuildInputs(osm=SHARED_DATA / "monaco" / "monaco.osm.gz", region="andorra")
    patch = PatchInputs(old=old, old_extract=first.osm, new_extract=other.osm, files=(), changes=None)
    report: dict = {}
    stream = io.StringIO()
    error = None
    try:
        build(other, out, settings, stages=_timed_stages(log, answer, slow_fails=slow_fails), reuse=old,
              patch=patch, report=report, progress=Progress(stream=stream))
    except BuildError as exc:
        error = str(exc)
    times = {parts[0]: (float(parts[1]), float(parts[2])) for parts in (line.split() for line in log.read_text().splitlines())}
    entry = None if error else Bundle.open(out).stages["quick"]
    return {"fork_safe": fork_safe(), "times": times, "log": stream.getvalue(), "report": report, "error": error,
            "entry": entry, "y": None if error else (out / "quick" / "y").read_text(),
            "leftover": (out / "quick" / "leftover").exists(), "published_same": os.path.realpath(out) == before}


def _in_fresh_process(tmp_path, answer, slow_fails: bool = False) -> dict:
    code = ("import json, sys; from tests.test_bundler import early_case; "
            f"print(json.dumps(early_case({str(tmp_path)!r}, {answer!r}, {slow_fails!r})))")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("answer", [None, 9])
def test_an_update_patches_a_stage_early_beside_the_stages_before_it(tmp_path, answer):
    """A stage whose needs are met is patched in its own process while an earlier stage it does not read
    still runs; its log lines are shown when the build reaches it; a declined early patch runs in full
    on a clean folder."""
    r = _in_fresh_process(tmp_path, answer)
    times, report = r["times"], r["report"]
    assert r["fork_safe"]
    assert "slow-saw-quick" in times  # the patch started while the slow stage ran
    assert "[quick] a line from the early patch" in r["log"]
    if answer is None:
        assert times["quick-run"][0] >= times["slow-run"][1]  # the full run, in its turn
        assert report["stages_rebuilt"] == ["slow", "quick"] and report["stages_patched"] == []
        assert r["y"] == "run" and not r["leftover"]
    else:
        assert "quick-run" not in times
        assert report["stages_patched"] == ["quick"] and r["entry"]["counts"] == {"n": 9}
        assert r["entry"]["cost"]["early"] and r["entry"]["cost"]["waited_s"] <= r["entry"]["cost"]["seconds"]
        assert r["y"] == "patched"


def test_a_failed_stage_stops_the_patches_started_early(tmp_path):
    r = _in_fresh_process(tmp_path, 9, slow_fails=True)
    assert "slow failed" in r["error"] and r["published_same"]  # nothing published
