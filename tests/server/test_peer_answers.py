"""The dialects against their peers' recorded answers on Andorra (issue 27's loose ends): osrm-routed 26.10
and Valhalla 3.9.1 answered the same requests; `tests/server/peer_answers/*.json` hold the structure of
their answers (codes, counts, keys), recorded by `benchmarks/record_peer_answers.py` (the command is in
each file). Floats differ legitimately between the engines (different graphs and speed models) and are
not compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geoengine.routing.snap import MAX_DEFAULT_RADIUS

ANSWERS = Path(__file__).parent / "peer_answers"
OSRM = json.loads((ANSWERS / "osrm_andorra.json").read_text(encoding="utf-8"))
VALHALLA = json.loads((ANSWERS / "valhalla_andorra.json").read_text(encoding="utf-8"))
VERBAL = ("verbal_pre_transition_instruction", "verbal_post_transition_instruction",
          "verbal_transition_alert_instruction")


@pytest.fixture(scope="module")
def client(api_client, andorra):
    return api_client(andorra)


def test_the_fixtures_name_their_peer_and_command():
    for doc, peer in ((OSRM, "osrm-routed 26.10"), (VALHALLA, "Valhalla 3.9.1")):
        assert doc["peer"].startswith(peer) and "benchmarks/record_peer_answers.py" in doc["recorded_by"]


@pytest.mark.parametrize("peer", OSRM["nearest"], ids=lambda p: p["path"].split("/")[-1])
def test_osrm_nearest_number_gives_as_many_waypoints_as_osrm(client, peer):
    r = client.get(peer["path"])
    body = r.json()
    if peer["distances"][0] > MAX_DEFAULT_RADIUS:
        # osrm-routed's nearest has no radius; geoengine snaps within 500 m (docs/osrm.md): NoSegment
        assert (r.status_code, body["code"]) == (400, "NoSegment"), body
        return
    assert (r.status_code, body["code"]) == (peer["status"], peer["code"]), body
    wps = body["waypoints"]
    assert len(wps) == peer["waypoints"]
    assert sorted({k for w in wps for k in w}) == peer["keys"]
    d = [w["distance"] for w in wps]
    assert d == sorted(d)  # nearest first, as osrm-routed
    assert len({tuple(w["nodes"]) for w in wps}) == len(wps)  # distinct road segments


@pytest.mark.parametrize("peer", OSRM["malformed"], ids=lambda p: p["path"][len("/route/v1/driving/"):] or p["path"])
def test_osrm_malformed_coordinates_answer_osrms_code(client, peer):
    r = client.get(peer["path"])
    assert r.status_code == peer["status"] == 400
    body = r.json()
    assert body["code"] == peer["code"], body
    assert set(body) == {"code", "message"} and body["message"]


@pytest.mark.parametrize("peer", VALHALLA["route"], ids=lambda p: p["body"]["directions_options"]["language"])
def test_valhalla_route_maneuvers_carry_the_verbal_instructions(client, peer):
    assert "error" not in peer, peer
    r = client.post("/route", json=peer["body"])
    assert r.status_code == 200, r.text
    ours = [m for leg in r.json()["trip"]["legs"] for m in leg["maneuvers"]]
    theirs = [set(m["keys"]) for m in peer["maneuvers"]]
    for key in VERBAL:
        has = [key in m for m in ours]
        assert any(key in m for m in theirs) and any(has), key
        # where Valhalla always, never, or only not at the ends gives it, so do we
        if all(key in m for m in theirs):
            assert all(has), key
        for end in (0, -1):
            assert has[end] == (key in theirs[end]), (key, end)
        assert all(isinstance(m[key], str) and m[key] for m in ours if key in m)
    # the pre-transition text is the instruction as said: the same words, street names as a spoken list
    for m in ours:
        pre = m["verbal_pre_transition_instruction"]
        assert pre == m["instruction"] or ("/" in m["instruction"] and "/" not in pre), (pre, m["instruction"])
