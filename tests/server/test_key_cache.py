"""The gateway's in-process key cache: no store read for a cached key, only hashes in memory, and a
revocation or plan change made by another process takes effect within the documented lifetime."""

from __future__ import annotations

import sqlite3
import time

from starlette.testclient import TestClient

from geoengine.config import Settings
from geoengine.gateway import KeyStore, load_plans
from geoengine.gateway.cache import CachedKeyStore
from geoengine.server.app import create_app


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_cached_key_skips_the_store_until_the_lifetime_ends(tmp_path):
    store = KeyStore(tmp_path / "state.sqlite3")
    key, rec = store.create("free", "a")
    clock = Clock()
    cache = CachedKeyStore(KeyStore(tmp_path / "state.sqlite3"), ttl_s=5.0, clock=clock)
    assert cache.authenticate(key).id == rec.id
    for _ in range(100):
        assert cache.authenticate(key).id == rec.id
    assert cache.lookups == 1
    # only the SHA-256 of the key is held, never the key
    assert all(isinstance(h, bytes) and len(h) == 32 for h in cache._hits)
    assert key not in repr(cache._hits) and key.encode() not in b"".join(cache._hits)
    # another process revokes it: still served until the lifetime ends, refused right after
    store.revoke(rec.id)
    clock.t += 4.9
    assert cache.authenticate(key) is not None
    clock.t += 0.2
    assert cache.authenticate(key) is None
    assert cache.authenticate(key) is None and cache.lookups == 3  # refused keys are never cached
    assert len(cache) == 0


def test_plan_change_takes_effect_within_the_lifetime(tmp_path):
    path = tmp_path / "state.sqlite3"
    store = KeyStore(path)
    key, rec = store.create("unlimited")
    clock = Clock()
    cache = CachedKeyStore(KeyStore(path), ttl_s=2.0, clock=clock)
    assert cache.authenticate(key).plan == "unlimited"
    db = sqlite3.connect(path)
    db.execute("UPDATE keys SET plan = 'free' WHERE id = ?", (rec.id,))
    db.commit()
    db.close()
    assert cache.authenticate(key).plan == "unlimited"
    clock.t += 2.01
    assert cache.authenticate(key).plan == "free"


def test_own_revocation_is_immediate_and_ttl_zero_reads_every_time(tmp_path):
    store = KeyStore(tmp_path / "state.sqlite3")
    key, rec = store.create("free")
    cache = CachedKeyStore(store, ttl_s=60)
    assert cache.authenticate(key) is not None
    cache.revoke(key)
    assert cache.authenticate(key) is None
    key2, _ = store.create("free")
    off = CachedKeyStore(store, ttl_s=0)
    for _ in range(3):
        assert off.authenticate(key2) is not None
    assert off.lookups == 3 and len(off) == 0


def test_cache_is_bounded(tmp_path):
    store = KeyStore(tmp_path / "state.sqlite3")
    keys = [store.create("free")[0] for _ in range(5)]
    cache = CachedKeyStore(store, ttl_s=60, max_entries=3)
    for k in keys:
        assert cache.authenticate(k) is not None
    assert len(cache) == 3
    assert cache.authenticate(keys[-1]) is not None and cache.lookups == 5  # the newest stayed


def test_revoked_key_stops_working_over_http_within_the_lifetime(tmp_path, andorra):
    settings = Settings(home=tmp_path, gateway_host="maps.example.test", gateway_key_ttl_s=0.5)
    cli_store = KeyStore(settings.state, load_plans(None))  # as `geoengine keys revoke` in another process
    key, rec = cli_store.create("unlimited")
    app = create_app(andorra, settings)  # the app's own store, wrapped in the cache
    client = TestClient(app, raise_server_exceptions=False)
    h = {"X-Gateway-Key": key, "X-Gateway-Host": "maps.example.test"}
    assert client.get("/health", headers=h).status_code == 200
    assert client.get("/sources", headers=h).status_code == 200
    cache = app.state.keystore
    assert isinstance(cache, CachedKeyStore) and cache.lookups == 1
    t0 = time.monotonic()  # the key was read before t0: its entry is gone by t0 + 0.5 s
    cli_store.revoke(rec.id)
    while True:
        started = time.monotonic()
        status = client.get("/health", headers=h).status_code
        if status != 200:
            break
        assert started - t0 < 0.5, "a revoked key kept working past the documented lifetime"
        time.sleep(0.02)
    for path in ("/health", "/sources", "/tiles/andorra/0/0/0", "/search?q=andorra"):
        r = client.get(path, headers=h)
        assert r.status_code == 403 and r.json()["detail"] == "invalid or revoked API key"


def test_default_lifetime_is_documented():
    from pathlib import Path

    assert Settings().gateway_key_ttl_s == 5.0
    docs = (Path(__file__).resolve().parents[2] / "docs" / "gateway.md").read_text()
    assert "GEOENGINE_GATEWAY_KEY_TTL" in docs and "5 s" in docs
