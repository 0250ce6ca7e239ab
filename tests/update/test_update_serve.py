"""A running `geoengine serve --workers 2` switches to an update with no failed request, and bad input
changes nothing. A replication server laid out as OSM's (state.txt, 000/000/NNN.osc.gz and
NNN.state.txt) is served on loopback; `geoengine update --replication URL` brings the bundle from the
Liechtenstein extract's timestamp to sequence 11 (the change file of tests/update/edits.py) while
clients keep requesting routes, searches, tiles and /health: every answer is 200, and the new data
is served right after. Then each bad input (change files that do not apply: unknown ids, objects the
bundle already has, a sequence older than the bundle's, a replication server behind the bundle; a
truncated .osc.gz; a replication URL that cannot be reached) is one clear `error:` line, exit 1, the
published bundle unchanged and the server serving it."""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import osmium
import pytest

from geoengine.gateway import KeyStore
from tests.serving import free_port, start_serve, stop, wait_up

from .conftest import publish_copy
from .edits import WHEN

HOST = "maps.example.test"
A = {"lon": 9.5209, "lat": 47.1410}  # Vaduz
B = {"lon": 9.5095, "lat": 47.1655}  # Schaan
OLD_STAMP = "2015-07-27T21:14:01Z"
NEW_STAMP = WHEN.strftime("%Y-%m-%dT%H:%M:%SZ")
DIRS: dict[str, Path] = {}  # the replication directories the fixture serves


def _state(seq: int, stamp: str) -> str:
    return f"#written by the test\nsequenceNumber={seq}\ntimestamp={stamp.replace(':', chr(92) + ':')}\n"


def replication_dir(root: Path, diffs: dict[int, tuple[bytes, str]]) -> Path:
    """OSM's replication layout: state.txt (the newest), and per sequence NNN.osc.gz and NNN.state.txt."""
    for seq, (osc_gz, stamp) in diffs.items():
        d = root / f"{seq // 1000000:03d}" / f"{seq // 1000 % 1000:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{seq % 1000:03d}.osc.gz").write_bytes(osc_gz)
        (d / f"{seq % 1000:03d}.state.txt").write_text(_state(seq, stamp))
    last = max(diffs)
    (root / "state.txt").write_text(_state(last, diffs[last][1]))
    return root


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def replication(edits, tmp_path_factory):
    root = tmp_path_factory.mktemp("replication")
    # diff 10 holds the bundle's data timestamp: the update starts there, and the node it brings (as the
    # extract already has it) is left out of the merge
    node = next(n.replace(location=n.location, tags=dict(n.tags))
                for n in osmium.FileProcessor(str(edits["old"]), osmium.osm.NODE))
    w = osmium.SimpleWriter(str(root / "10.osc.gz"))
    w.add_node(node)
    w.close()
    replication_dir(root / "minute", {10: ((root / "10.osc.gz").read_bytes(), "2015-07-27T21:00:00Z"),
                                      11: (edits["osc"].read_bytes(), NEW_STAMP)})
    DIRS["minute"] = root / "minute"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def served(old_bundle, tmp_path_factory):
    """`geoengine serve --workers 2` on a published copy of the old bundle."""
    root = tmp_path_factory.mktemp("served")
    out = publish_copy(old_bundle, root)
    home = root / "home"
    env = {**os.environ, "GEOENGINE_HOME": str(home), "GEOENGINE_GATEWAY_HOST": HOST, "GEOENGINE_LOG_LEVEL": "info"}
    env.pop("GEOENGINE_REDIS_URL", None)
    key, _ = KeyStore(home / "state.sqlite3").create("unlimited")
    port = free_port()
    logpath = root / "serve.log"
    proc = start_serve(out, port, env, open(logpath, "w"), "--workers", "2")
    try:
        wait_up(port, proc, logpath, timeout=900)  # two workers open and warm the bundle (slow on a busy machine)
        deadline = time.time() + 600
        while logpath.read_text().count("Application startup complete") < 2:
            assert time.time() < deadline, logpath.read_text()[-3000:]
            time.sleep(0.3)
        yield {"out": out, "base": f"http://127.0.0.1:{port}", "env": env, "log": logpath, "proc": proc,
               "h": {"X-Gateway-Key": key, "X-Gateway-Host": HOST}}
    finally:
        stop(proc)


def _cli(env, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", "geoengine", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _health(served) -> dict:
    r = httpx.get(served["base"] + "/health", headers=served["h"], timeout=120)  # a new connection: any worker
    assert r.status_code == 200, r.text
    return r.json()


def _load(served, statuses, stop, i):
    with httpx.Client(base_url=served["base"], headers=served["h"], timeout=60) as c:
        while not stop.is_set():
            for name, call in (("route", lambda: c.post("/route", json={"locations": [A, B]})),
                               ("bicycle", lambda: c.post("/route", json={"locations": [A, B], "costing": "bicycle"})),
                               ("search", lambda: c.get("/search", params={"q": "Aktualisierungsweg"})),
                               ("tile", lambda: c.get(f"/tiles/valhalla-liechtenstein-latest/13/{4312 + i % 2}/2877")),
                               ("health", lambda: c.get("/health"))):
                try:
                    statuses.append((name, call().status_code))
                except httpx.HTTPError as exc:
                    statuses.append((name, repr(exc)))


def _wait_switched(served) -> float:
    """Every worker switches by itself (the watch on the published path): wait until 20 answers in a row,
    each on a new connection, come from the new data; the seconds until the first did."""
    deadline, in_a_row, switched_after = time.time() + 180, 0, 0.0
    t0 = time.monotonic()
    while in_a_row < 20:
        assert time.time() < deadline, served["log"].read_text()[-3000:]
        h = _health(served)
        in_a_row = in_a_row + 1 if h["data_timestamp"] == NEW_STAMP else 0
        if in_a_row == 1:
            switched_after = time.monotonic() - t0
        time.sleep(0.05)
    return switched_after


@pytest.mark.e2e
def test_a_replication_update_switches_two_workers_under_load_with_no_failed_request(served, replication, edits):
    out = served["out"]
    assert _health(served)["data_timestamp"] == OLD_STAMP
    before = os.path.realpath(out)
    statuses: list = []
    stop = threading.Event()
    threads = [threading.Thread(target=_load, args=(served, statuses, stop, i)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(2)
        run = _cli(served["env"], "update", str(out), "--replication", replication + "/minute/")
        assert run.returncode == 0, run.stderr[-3000:]
        assert os.path.realpath(out) != before
        switched_after = _wait_switched(served)
        time.sleep(1)  # the load goes on against the new engines a moment
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    bad = [s for s in statuses if s[1] != 200 and s != ("tile", 204)]  # 204: a tile with no features
    assert len(statuses) > 50 and not bad, (len(statuses), bad[:10])
    assert {n for n, _ in statuses} == {"route", "bicycle", "search", "tile", "health"}
    m = json.loads((out / "manifest.json").read_text())
    assert m["update"]["sequences"] == [10, 11] and m["update"]["already_applied"] == 1
    assert m["replication_url"] == replication + "/minute/"
    h = _health(served)
    assert h["replication_sequence"] == 11 and h["data_timestamp"] == NEW_STAMP and h["data_age_s"] > 0
    for _ in range(10):  # the new data, from whichever worker answers
        r = httpx.get(served["base"] + "/search", params={"q": edits["new_street"]}, headers=served["h"], timeout=120)
        assert r.status_code == 200 and r.json()["results"][0]["name"] == edits["new_street"]
    print(f"switched {switched_after:.1f} s after the update returned; {len(statuses)} requests, 0 failed")


def _unchanged(served, run, *phrases):
    """A clear error, nothing published, the server still serving the same data."""
    assert run.returncode == 1, (run.returncode, run.stdout, run.stderr[-2000:])
    err = run.stderr.strip().splitlines()
    assert err and err[-1].startswith("error: ") and "Traceback" not in run.stderr, run.stderr[-2000:]
    for p in phrases:
        assert p in err[-1], err[-1]
    return err[-1]


@pytest.fixture()
def published(served, replication):
    """The published version and manifest before a bad input; after it, both must be the same. The bad
    inputs are judged against the bundle at sequence 11: the replication test leaves it there, and a test
    run without it (alone, or selected with -k) brings it there first."""
    out = served["out"]
    if _health(served).get("replication_sequence") != 11:
        run = _cli(served["env"], "update", str(out), "--replication", replication + "/minute/")
        assert run.returncode == 0, run.stderr[-3000:]
        _wait_switched(served)
    before = (os.path.realpath(out), (out / "manifest.json").read_bytes(), _health(served)["data_timestamp"])
    yield out
    assert os.path.realpath(out) == before[0] and (out / "manifest.json").read_bytes() == before[1]
    assert not list(out.parent.glob(".li.update*/")) and not (out.parent / ".li.build").exists()
    h = _health(served)
    assert h["data_timestamp"] == before[2]
    r = httpx.post(served["base"] + "/route", json={"locations": [A, B]}, headers=served["h"], timeout=120)
    assert r.status_code == 200


@pytest.mark.e2e
def test_up_to_date_publishes_nothing(served, replication, published):
    run = _cli(served["env"], "update", str(published), "--replication", replication + "/minute/")
    assert run.returncode == 0 and "nothing to do: up to date" in run.stderr, run.stderr[-2000:]


@pytest.mark.e2e
def test_a_diff_with_unknown_ids_is_refused(served, published, tmp_path):
    osc = tmp_path / "unknown.osc"
    osc.write_text("<?xml version='1.0' encoding='UTF-8'?>\n<osmChange version=\"0.6\">\n<modify>\n"
                   '<way id="987654321012" version="3" timestamp="2015-07-29T00:00:00Z">'
                   '<nd ref="1"/><nd ref="2"/><tag k="highway" v="residential"/></way>\n'
                   '</modify>\n<delete>\n<node id="987654321013" version="2" lat="47.1" lon="9.5"/>\n'
                   "</delete>\n</osmChange>\n")
    _unchanged(served, _cli(served["env"], "update", str(published), "--diff", str(osc)),
               "do not apply", "2 changed object(s) are not in it", "way 987654321012")


@pytest.mark.e2e
def test_a_diff_already_applied_or_older_than_the_bundle_is_refused(served, edits, published):
    # the bundle is past the change file (sequence 11 applied it): its objects' versions are there
    _unchanged(served, _cli(served["env"], "update", str(published), "--diff", str(edits["osc"])),
               "older than the bundle's data or were applied already")


@pytest.mark.e2e
def test_a_sequence_older_than_the_bundles_is_refused(served, edits, published):
    _unchanged(served, _cli(served["env"], "update", str(published), "--diff", str(edits["osc"]), "--sequence", "5"),
               "sequence 5, not newer than the bundle's 11")


@pytest.mark.e2e
def test_a_replication_server_behind_the_bundle_is_refused(served, replication, published):
    """The bundle's own stream now says sequence 5 (a server restored from an old backup, say)."""
    state = DIRS["minute"] / "state.txt"
    saved = state.read_text()
    state.write_text(_state(5, "2015-07-20T00:00:00Z"))
    try:
        _unchanged(served, _cli(served["env"], "update", str(published), "--replication", replication + "/minute/"),
                   "is at sequence 5, older than the bundle's 11")
    finally:
        state.write_text(saved)


@pytest.mark.e2e
def test_a_truncated_osc_gz_is_refused(served, edits, published, tmp_path):
    data = edits["osc"].read_bytes()  # gzip
    cut = tmp_path / "cut.osc.gz"
    cut.write_bytes(data[: len(data) * 2 // 3])
    _unchanged(served, _cli(served["env"], "update", str(published), "--diff", str(cut)),
               "cut.osc.gz cannot be read")


@pytest.mark.e2e
def test_an_unreachable_replication_url_is_refused(served, published):
    port = free_port()  # nothing listens there
    _unchanged(served, _cli(served["env"], "update", str(published), "--replication", f"http://127.0.0.1:{port}/minute/"),
               "cannot be reached")
