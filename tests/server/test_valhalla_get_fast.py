"""Valhalla's `GET /route?json={body}` below FastAPI: the hot path (ASGI) and, for a plain
two-location route, the front door (below ASGI) give the status and document of the FastAPI route
for the same request, bad bodies included; counted keys still go through the gateway. Real Andorra
engine."""

from __future__ import annotations

import json
from urllib.parse import quote

from tests.server.test_frontdoor import HOST, counted, through_front_door

A, B, C = {"lon": 1.5218, "lat": 42.5063}, {"lon": 1.5333, "lat": 42.5107}, {"lon": 1.5450, "lat": 42.5120}
# (body, whether the front door answers it itself)
CASES = [
    ({"locations": [A, B]}, True),
    ({"locations": [A, C], "costing": "pedestrian", "directions_options": {"language": "de-DE"}}, True),
    ({"locations": [A, C], "costing": "bicycle", "narrative": False, "units": "miles"}, True),
    ({"locations": [A, {"lon": 0.0, "lat": 0.0}]}, True),  # the engine's problem: no road in reach
    ({"locations": [A, B, C]}, False),  # three locations: the thread pool
    ({"locations": [A, C], "alternates": 1}, False),
    ({"locations": [A]}, False),  # the model refuses it: the FastAPI route's 400
    ({"locations": [A, B], "costing": "jetpack"}, False),
    ("{not json", False),
]


def _path(body) -> str:
    return "/route?json=" + quote(body if isinstance(body, str) else json.dumps(body))


def test_get_route_below_fastapi_gives_the_routes_answers(served):
    app, store, client = served
    key, _ = store.create("unlimited")
    h = {"X-Gateway-Key": key, "X-Gateway-Host": HOST}
    ref = {}
    for body, _ in CASES:
        path = _path(body)
        r = client.get(path + "&" + path[len("/route?"):], headers=h)  # json twice: the FastAPI route reads it
        ref[path] = (r.status_code, r.headers["content-type"], r.json())
        hot = client.get(path, headers=h)
        assert (hot.status_code, hot.headers["content-type"], hot.json()) == ref[path], body
    statuses = [v[0] for v in ref.values()]
    assert statuses.count(200) == 5 and 400 in statuses and 422 in statuses
    assert ref[_path(CASES[1][0])][2]["trip"]["language"] == "de-DE"

    paths = [_path(body) for body, _ in CASES]
    for (body, front), path, (r, answered) in zip(CASES, paths, through_front_door(app, key, paths), strict=True):
        assert answered == front, body
        assert (r["status"], r["headers"]["content-type"], json.loads(r["body"])) == ref[path], body


def test_get_route_counted_keys_go_through_the_gateway(served):
    app, store, client = served
    path = _path({"locations": [A, B]})
    assert client.get(path).status_code in (401, 403)  # no key
    responses, usage = counted(app, store, path)
    assert [r["status"] for r in responses] == [200] * 3 and json.loads(responses[0]["body"])["trip"]["status"] == 0
    assert usage == 3
