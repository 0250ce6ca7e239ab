"""Page-session (cookie) tiles answered below ASGI (server/dispatch.py, server/admission.py `quick`,
server/web/access.py `quick_session`): the same bytes as the application gives, and every rule of the
web layer still holds on that path: the signature and expiry of the cookie, the same-origin check, the
per-session rate limit (counted once per request, whichever side answers), a plan that counts tiles,
a damaged bundle group."""

from __future__ import annotations

import asyncio
import gzip

from geoengine.gateway import Plan, Pool
from geoengine.server.web.session import COOKIE, RateLimiter
from tests.server.test_frontdoor import TILE, Conn

SAME = "Sec-Fetch-Site: same-origin\r\n"


def _get(path: str, cookie: str | None, extra: str = SAME) -> bytes:
    jar = f"Cookie: theme=dark; {COOKIE}={cookie}\r\n" if cookie is not None else ""
    return f"GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept-Encoding: gzip\r\n{jar}{extra}\r\n".encode()


def _exchange(app, requests: list[bytes]) -> list[tuple[dict, bool]]:
    door = app.state.front_door

    async def main():
        conn = Conn(app, asyncio.get_running_loop())
        out = []
        for raw in requests:
            before = door.answered
            (r,) = await conn.exchange(raw, 1)
            out.append((r, door.answered == before + 1))
        conn.proto.connection_lost(None)
        return out

    return asyncio.run(main())


def _cookie(app) -> str:
    return app.state.admission.web.signer.issue()[0]


def test_a_session_tile_is_answered_below_asgi_as_the_application_answers_it(served):
    app, _, client = served
    cookie = _cookie(app)
    (fast, below), = _exchange(app, [_get(TILE, cookie)])
    assert below and fast["status"] == 200
    ref = client.get(TILE, headers={"Cookie": f"{COOKIE}={cookie}", "Sec-Fetch-Site": "same-origin",
                                    "Accept-Encoding": "gzip"})
    assert ref.status_code == 200
    assert gzip.decompress(fast["body"]) == ref.content  # the stored gzip bytes (the test client decodes them)
    for name in ("content-type", "etag", "cache-control", "content-encoding"):
        assert fast["headers"][name] == ref.headers[name], name
    # a missing tile: 204 below ASGI too
    (none, below), = _exchange(app, [_get("/tiles/andorra/14/0/0", cookie)])
    assert below and none["status"] == 204


def test_the_web_rules_hold_for_session_tiles(served):
    app, _, _ = served
    cookie = _cookie(app)
    forged = cookie[:-1] + ("0" if cookie[-1] != "0" else "1")
    expired = app.state.admission.web.signer.issue(now=1.0)[0]
    cases = [
        (_get(TILE, forged), 403),  # a bad signature
        (_get(TILE, expired), 403),  # expired
        (_get(TILE, cookie, "Sec-Fetch-Site: cross-site\r\n"), 403),  # another site's page
        (_get(TILE, cookie, SAME + "Origin: https://evil.example\r\n"), 403),  # another origin
        (_get(TILE, None), 403),  # no cookie, no key: the gateway's refusal
        (_get(TILE, cookie, SAME + "X-Gateway-Key: gk_00000000_x\r\n"), 403),  # a key is the gateway's to judge
    ]
    for (r, below), (_raw, status) in zip(_exchange(app, [raw for raw, _ in cases]), cases, strict=True):
        assert not below and r["status"] == status, (_raw, r["status"])


def test_the_session_rate_limit_counts_each_request_once(served):
    app, _, _ = served
    web = app.state.admission.web
    web.limiter = RateLimiter(3)
    cookie = _cookie(app)
    out = _exchange(app, [_get(TILE, cookie)] * 5)
    assert [r["status"] for r, _ in out] == [200, 200, 200, 429, 429]
    assert [below for _, below in out] == [True, True, True, False, False]  # the refusal is the application's
    assert int(out[3][0]["headers"]["retry-after"]) >= 1


def test_a_plan_that_counts_tiles_goes_to_the_application(served, monkeypatch):
    app, _, _ = served
    web = app.state.admission.web
    cookie = _cookie(app)
    counting = Plan("counting", (Pool("all", "day", 2),))
    monkeypatch.setitem(web.keystore.plans, "counting", counting)
    monkeypatch.setattr(web, "session_plan", "counting")
    monkeypatch.setattr(web, "_session_record", web._session_record.__class__("ws", "counting", "", ""))
    out = _exchange(app, [_get(TILE, cookie)] * 3)
    assert [r["status"] for r, _ in out] == [200, 200, 429]  # counted exactly by the application
    assert not any(below for _, below in out)


def test_a_damaged_tiles_group_is_the_applications_503(served, monkeypatch):
    app, _, _ = served
    monkeypatch.setattr(app.state.admission, "damaged", lambda path: "the tiles stage lost a file")
    (r, below), = _exchange(app, [_get(TILE, _cookie(app))])
    assert not below and r["status"] == 503
