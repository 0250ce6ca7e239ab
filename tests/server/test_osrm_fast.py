"""The OSRM dialect below FastAPI: GET /{service}/v1/{profile}/{coordinates} answered by the hot path
(ASGI) and, for a two-coordinate route or a nearest, by the front door (below ASGI), with the status
and document the FastAPI route gives for the same request; the gateway's rules and quotas unchanged.
Real Andorra engine, real requests an OSRM client sends."""

from __future__ import annotations

import asyncio
import json

from tests.server.test_frontdoor import HOST, Conn, counted, get, through_front_door

A, B, C = "1.5218,42.5063", "1.5333,42.5107", "1.5450,42.5120"
FAR = "0.0,0.0"
# (path, whether the front door answers it itself)
CASES = [
    (f"/route/v1/driving/{A};{B}", True),
    (f"/route/v1/driving/{A};{B}?overview=false", True),
    (f"/route/v1/driving/{A};{B}?overview=full&geometries=geojson&annotations=true", True),
    (f"/route/v1/driving/{A};{B}?steps=true&geometries=polyline6", True),
    (f"/route/v1/car/{A};{B}.json?alternatives=false", True),
    (f"/route/v1/foot/{A};{B}?steps=true", True),
    (f"/route/v1/driving/{A};{B}?alternatives=true", False),  # the thread pool
    (f"/route/v1/driving/{A};{B};{C}?steps=true", False),
    (f"/nearest/v1/driving/{A}?number=3", True),
    (f"/table/v1/driving/{A};{B};{C}?annotations=duration,distance", False),
    (f"/trip/v1/driving/{A};{B};{C}", False),
    (f"/match/v1/driving/{A};1.5222,42.5066;1.5230,42.5070", False),
    # OSRM's errors, HTTP 400 with {code, message}
    (f"/route/v2/driving/{A};{B}", True),
    (f"/route/v1/driving/{A};{FAR}", True),
    (f"/route/v1/driving/{A};{B}?overview=maybe", True),
    (f"/route/v1/spaceship/{A};{B}", True),
    ("/route/v1/driving/abc;def", True),
    (f"/route/v1/driving/{A}", False),  # one coordinate: no route; the front door's rule is two
]


def _via_app(path: str) -> str:
    """The same request with a parameter repeated (same value): the fast paths leave a repeated
    parameter to the FastAPI route, which reads the last value as before."""
    sep = "&" if "?" in path else "?"
    return f"{path}{sep}generate_hints=true&generate_hints=true"


def test_osrm_requests_below_fastapi_get_the_routes_answers(served):
    app, store, client = served
    key, _ = store.create("unlimited")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    ref = {}
    for path, _ in CASES:
        r = client.get(_via_app(path), headers=h)
        ref[path] = (r.status_code, r.headers["content-type"], r.json())
        hot = client.get(path, headers=h)
        assert (hot.status_code, hot.headers["content-type"], hot.json()) == ref[path], path
        assert r.status_code in (200, 400), path
        if r.status_code == 400:
            assert set(r.json()) == {"code", "message"} and r.json()["code"] != "Ok"
        else:
            assert r.json()["code"] == "Ok"
    for path in (f"/route/v1/driving/{A};{B}?alternatives=true", f"/route/v1/driving/{A};{B};{C}?steps=true",
                 f"/table/v1/driving/{A};{B};{C}?annotations=duration,distance", f"/trip/v1/driving/{A};{B};{C}",
                 f"/nearest/v1/driving/{A}?number=3", f"/match/v1/driving/{A};1.5222,42.5066;1.5230,42.5070"):
        assert ref[path][0] == 200 and ref[path][2]["code"] == "Ok", path
    assert ref[f"/route/v1/driving/{A};{FAR}"][2]["code"] == "NoSegment"
    assert ref[f"/route/v2/driving/{A};{B}"][2]["code"] == "InvalidVersion"
    assert ref[f"/route/v1/driving/{A};{B}?steps=true&geometries=polyline6"][2]["routes"][0]["legs"][0]["steps"]

    for (path, front), (r, answered) in zip(CASES, through_front_door(app, key, [p for p, _ in CASES]), strict=True):
        assert answered == front, path
        assert (r["status"], r["headers"]["content-type"], json.loads(r["body"])) == ref[path], path


def test_osrm_fast_paths_keep_the_gateways_rules(served):
    app, store, client = served
    path = f"/route/v1/driving/{A};{B}?overview=false"
    assert client.get(path).status_code == 403  # no key
    assert client.get(path, headers={"X-Gateway-Key": "gk_nope", "X-Gateway-Host": HOST}).status_code == 403
    key, _ = store.create("unlimited")

    async def wrong_host():  # through the protocol, where the front door would take the request
        conn = Conn(app, asyncio.get_running_loop())
        await conn.exchange(get("/health", key), 1)
        (r,) = await conn.exchange(get(path, key, host="evil.example"), 1)
        conn.proto.connection_lost(None)
        return r

    assert asyncio.run(wrong_host())["status"] == 403
    responses, usage = counted(app, store, path)
    assert [r["status"] for r in responses] == [200] * 3 and json.loads(responses[0]["body"])["code"] == "Ok"
    assert usage == 3
