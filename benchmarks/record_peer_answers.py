"""Records the peers' answers the dialect tests compare with (issue 27's loose ends), on Andorra:

    PYTHONPATH=. .venv/bin/python benchmarks/record_peer_answers.py

- osrm-routed (osrm-bindings from PyPI in `benchmarks/.peers/venv`, car profile, CH; see dialects_bench.py
  for the venv) answers the OSRM requests below; the structure of each answer is written to
  `tests/server/peer_answers/osrm_andorra.json`: HTTP status, `code`, and for nearest the number of
  waypoints, their keys and distances (the distances differ legitimately between the engines: different
  graphs; the tests compare counts and codes).
- Valhalla (pyvalhalla in `benchmarks/.peers/valhalla-venv`, its own `valhalla_build_tiles` on the same
  extract) answers `/route` in the six languages of geoengine's narrative; per maneuver the type and the
  instruction keys it carries (`instruction`, `verbal_*`) are written to `tests/server/peer_answers/valhalla_andorra.json` (not the texts: the
  wording and the maneuvers legitimately differ).

The request lists are in this file only; the fixtures carry them, so the tests replay exactly what the
peer was asked. Never imported by geoengine or the tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
OUT = ROOT / "tests" / "server" / "peer_answers"
PBF = ROOT.parent / "shared" / "data" / "andorra" / "andorra.osm.pbf"
VALHALLA_PY = ROOT / "benchmarks" / ".peers" / "valhalla-venv" / "bin" / "python"
COMMAND = "PYTHONPATH=. .venv/bin/python benchmarks/record_peer_answers.py"

# nearest with number=3: in the capital (roads within metres), on a road 20 m away with the next ones
# 35-60 m away (where the snapper stopped at its first radius), and a point 0.7 km from any road
NEAREST = [(1.5218, 42.5063), (1.4921, 42.4630), (1.6000, 42.5500)]
# malformed coordinates (percent-encoded as a client sends them): OSRM's code for each
MALFORMED = [
    "/route/v1/driving/1.5218,42.5063;abc", "/route/v1/driving/1.5218;1.5333,42.5107",
    "/route/v1/driving/1.5218,42.5063;1.5333", "/route/v1/driving/1.5218,42.5063,5;1.5333,42.5107",
    "/route/v1/driving/1.5218,,42.5063;1.5333,42.5107", "/route/v1/driving/x,y;1.5333,42.5107",
    "/route/v1/driving/1.5218,42.5063;;1.5333,42.5107", "/route/v1/driving/1.5218,42.5063;1.5333,42.5107;",
    "/route/v1/driving/1e1,42;1.5333,42.5107", "/route/v1/driving/nan,42;1.5333,42.5107",
    "/route/v1/driving/1.5,42.5x;1.5333,42.5107", "/route/v1/driving/polyline(abc",
    "/route/v1/driving/polyline6(abc", "/route/v1/driving/polyline()", "/route/v1/driving/.json",
    "/route/v1/driving/1.5,42.5;1.6,42.6.xml", "/route/v1/driving/%3B", "/table/v1/driving/1.5,42.5;1.5333,abc",
    "/nearest/v1/driving/abc", "/trip/v1/driving/1.5,42.5;x", "/match/v1/driving/1.5,42.5;x",
    "/route/v1/driving/%201.5,42.5;1.5333,42.5107", "/route/v1/driving/+1.5,42.5;1.6,42.6",
    "/route/v1/driving/200,42.5063;1.5333,42.5107", "/route/v1/driving/1.5218,95;1.5333,42.5107",
]
A = {"lon": 1.5218, "lat": 42.5063}
C = {"lon": 1.5341, "lat": 42.5555}
LANGUAGES = ["en-US", "fr-FR", "de-DE", "es-ES", "hi-IN", "ar"]

_VALHALLA = r"""
import json, os, subprocess, sys
from pathlib import Path
import valhalla
from valhalla import Actor, get_config
pbf, work, requests = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
tiles = work / "tiles"
tiles.mkdir(parents=True, exist_ok=True)
cfg = get_config(tile_extract="", tile_dir=str(tiles), verbose=False)
cfg["mjolnir"]["concurrency"] = 1
(work / "valhalla.json").write_text(json.dumps(cfg))
binary = Path(os.path.dirname(valhalla.__file__)) / "bin" / "valhalla_build_tiles"
subprocess.run([str(binary), "-c", str(work / "valhalla.json"), pbf], check=True, capture_output=True)
actor = Actor(str(work / "valhalla.json"))
out = []
for req in requests:
    try:
        out.append(json.loads(actor.route(json.dumps(req))))
    except Exception as exc:
        out.append({"error": str(exc)})
print(json.dumps({"version": valhalla.__version__, "answers": out}))
"""


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def record_osrm(work: Path) -> dict:
    from dialects_bench import PEER_PY, start_osrm

    version = subprocess.run([str(PEER_PY), "-c", "import importlib.metadata as m; print(m.version('osrm-bindings'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    proc, url = start_osrm(PBF, work / "osrm")
    try:
        nearest = []
        for lon, lat in NEAREST:
            path = f"/nearest/v1/driving/{lon},{lat}?number=3"
            status, body = _get(url + path)
            wps = body.get("waypoints", [])
            nearest.append({"path": path, "status": status, "code": body["code"], "waypoints": len(wps),
                            "keys": sorted({k for w in wps for k in w}),
                            "distances": [round(w["distance"], 1) for w in wps]})
        malformed = []
        for path in MALFORMED:
            status, body = _get(url + path)
            malformed.append({"path": path, "status": status, "code": body["code"]})
    finally:
        proc.terminate()
        proc.wait()
    return {"peer": f"osrm-routed {version} (osrm-bindings, car.lua, CH)", "recorded_by": COMMAND,
            "nearest": nearest, "malformed": malformed}


def record_valhalla(work: Path) -> dict:
    requests = [{"locations": [A, C], "costing": "auto", "directions_options": {"language": lang}}
                for lang in LANGUAGES]
    p = subprocess.run([str(VALHALLA_PY), "-c", _VALHALLA, str(PBF), str(work / "valhalla"), json.dumps(requests)],
                       capture_output=True, text=True, check=True)
    got = json.loads(p.stdout)
    routes = []
    for req, ans in zip(requests, got["answers"], strict=True):
        if "error" in ans:
            routes.append({"body": req, "error": ans["error"]})
            continue
        ms = [m for leg in ans["trip"]["legs"] for m in leg["maneuvers"]]
        routes.append({"body": req, "maneuvers": [{"type": m["type"], "keys": sorted(k for k in m if "instruction" in k)}
                                                  for m in ms]})
    return {"peer": f"Valhalla {got['version']} (pyvalhalla, valhalla_build_tiles on the same extract)",
            "recorded_by": COMMAND, "route": routes}


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="peer-answers-") as tmp:
        work = Path(tmp)
        for name, fn in (("osrm_andorra.json", record_osrm), ("valhalla_andorra.json", record_valhalla)):
            doc = fn(work)
            # one line per top-level field and list item: small, and diffs show which answer changed
            lines = []
            for k, v in doc.items():
                if isinstance(v, list):
                    items = ",\n  ".join(json.dumps(x, ensure_ascii=False) for x in v)
                    lines.append(f'"{k}": [\n  {items}\n ]')
                else:
                    lines.append(f'"{k}": {json.dumps(v, ensure_ascii=False)}')
            (OUT / name).write_text("{\n " + ",\n ".join(lines) + "\n}\n", encoding="utf-8")
            print(f"wrote {OUT / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
