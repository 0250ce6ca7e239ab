"""Where the gateway keeps its state: keys, plans and quota counters.

Two implementations of one interface (`GatewayStore`):

- `geoengine.gateway.KeyStore`: one SQLite file (GEOENGINE_STATE), the embedded default; exact across
  the threads and worker processes of one machine.
- `RedisKeyStore`: a Redis server (GEOENGINE_REDIS_URL), shared by every replica on every machine
  behind a load balancer. Each request's quota check and increment of all its pools is one Lua script,
  which Redis runs atomically, so counts stay exact however many replicas count at once.

When Redis cannot be reached, every call raises `Unavailable` (503, Retry-After: 1): the gateway then
answers 503 with the problem body and never lets a request through unchecked or uncounted. Each call
opens or reuses a pooled connection, so a replica recovers by itself as soon as Redis is back.

Redis layout (prefix `geoengine:`): `key:<id>` a hash (key_hash, plan, label, created, revoked, scopes);
`keys` the set of ids; `usage:<id>` a hash `<scope>/<period>@<label>` -> count; `plans` the plans as
JSON, written by a replica or CLI started with GEOENGINE_PLANS_FILE and read by the others.
Run Redis with persistence (`appendonly yes`) if counters must survive a Redis restart.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
from typing import Protocol

from geoengine.errors import InvalidRequest, NotFound, Unavailable
from geoengine.gateway.keys import (
    DEFAULT_PLANS,
    KeyRecord,
    KeyStore,
    Plan,
    Pool,
    Quotas,
    _hash,
    check_key_scopes,
    hash_matches,
    key_id,
    load_plans,
    period_bounds,
    quota_exceeded,
)


class GatewayStore(Protocol):
    """What the gateway middleware and `geoengine keys` need from a store."""

    plans: dict[str, Plan]
    remote: bool  # True when a call may wait on the network (the gateway then calls it off the event loop)

    def create(self, plan: str, label: str = "", scopes=()) -> tuple[str, KeyRecord]: ...
    def list(self) -> list[KeyRecord]: ...
    def revoke(self, key_or_id: str) -> KeyRecord: ...
    def authenticate(self, key: str | None) -> KeyRecord | None: ...
    def counts(self, record: KeyRecord, path: str) -> bool: ...
    def consume(self, record: KeyRecord, path: str, now: dt.datetime | None = None) -> None: ...
    def usage(self, key_id: str) -> dict: ...


def open_publishable(settings, store):
    """The publishable-key store beside a gateway store: in the same Redis when the gateway uses Redis,
    else in the SQLite state file."""
    from geoengine.gateway.publishable import PublishableKeys

    store = getattr(store, "store", store)  # under the in-process key cache
    if isinstance(store, RedisKeyStore):
        return RedisPublishableKeys(store)
    return PublishableKeys(settings.state, store.plans)


def open_keystore(settings) -> GatewayStore:
    """The store the settings name: Redis when GEOENGINE_REDIS_URL is set, else the SQLite file."""
    plans = load_plans(settings.plans_file) if settings.plans_file else None
    if getattr(settings, "redis_url", None):
        return RedisKeyStore(settings.redis_url, plans)
    return KeyStore(settings.state, plans)


# Check every pool, then increment every pool, in one atomic step. KEYS[1]: the usage hash.
# ARGV: n, then n pairs (field, limit). Returns 0 when counted, else the 1-based index of a used-up pool.
_CONSUME = """
local n = tonumber(ARGV[1])
for i = 1, n do
  local c = tonumber(redis.call('HGET', KEYS[1], ARGV[2 * i]) or '0')
  if c >= tonumber(ARGV[2 * i + 1]) then return i end
end
for i = 1, n do
  redis.call('HINCRBY', KEYS[1], ARGV[2 * i], 1)
end
return 0
"""

PREFIX = "geoengine:"


def _plans_to_json(plans: dict[str, Plan]) -> str:
    return json.dumps({n: {"description": p.description,
                           "pools": [{"scope": q.scope, "period": q.period, "limit": q.limit} for q in p.pools]}
                       for n, p in plans.items()}, sort_keys=True)


def _plans_from_json(text: str) -> dict[str, Plan]:
    doc = json.loads(text)
    return {n: Plan(n, tuple(Pool(q["scope"], q["period"], int(q["limit"])) for q in spec.get("pools", [])),
                    spec.get("description", ""))
            for n, spec in doc.items()}


class RedisKeyStore(Quotas):
    """Keys, plans and quota counters in Redis, shared by every replica. Thread-safe (a connection pool)."""

    remote = True

    def __init__(self, url: str, plans: dict[str, Plan] | None = None, *, timeout_s: float = 2.0):
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as exc:  # pragma: no cover - the extra is part of the server install
            raise ValueError("GEOENGINE_REDIS_URL needs the redis client: pip install 'geoengine[redis]'") from exc
        self._errors = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
        self.url = url
        # No client-side retries: a lost Redis must turn into a quick 503, not a stalled request.
        self.r = redis.Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                      retry=Retry(NoBackoff(), 0), decode_responses=True)
        self._consume = self.r.register_script(_CONSUME)
        with self._guard():
            if plans is not None:
                self.r.set(PREFIX + "plans", _plans_to_json(plans))
                self.plans = dict(plans)
            else:
                stored = self.r.get(PREFIX + "plans")
                self.plans = _plans_from_json(stored) if stored else dict(DEFAULT_PLANS)

    # -- plumbing -------------------------------------------------------------------------------
    def _guard(self):
        store = self

        class _Guard:
            def __enter__(self):
                return self

            def __exit__(self, kind, exc, tb):
                if exc is not None and isinstance(exc, store._errors):
                    raise Unavailable("the gateway's shared state (Redis) is unreachable; retry shortly",
                                      headers={"Retry-After": "1"}) from None
                return False

        return _Guard()

    @staticmethod
    def _record(kid: str, h: dict, usage: dict | None = None) -> KeyRecord:
        return KeyRecord(kid, h.get("plan", ""), h.get("label", ""), h.get("created", ""), h.get("revoked") or None,
                         {k: int(v) for k, v in (usage or {}).items()}, tuple((h.get("scopes") or "").split()))

    # -- keys ------------------------------------------------------------------------------------
    def create(self, plan: str, label: str = "", scopes=()) -> tuple[str, KeyRecord]:
        if plan not in self.plans:
            raise InvalidRequest.field("plan", f"unknown plan '{plan}'; plans: {', '.join(sorted(self.plans))}")
        scopes = check_key_scopes(scopes)
        with self._guard():
            for _ in range(10):
                kid = secrets.token_hex(4)
                key = f"gk_{kid}_{secrets.token_urlsafe(24)}"
                name = f"{PREFIX}key:{kid}"
                if not self.r.hsetnx(name, "key_hash", _hash(key)):
                    continue
                created = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                fields = {"plan": plan, "label": label or "", "created": created, "revoked": "",
                          "scopes": " ".join(scopes)}
                pipe = self.r.pipeline()
                pipe.hset(name, mapping=fields)
                pipe.sadd(PREFIX + "keys", kid)
                pipe.execute()
                return key, self._record(kid, fields)
        raise RuntimeError("could not allocate a key id")

    def list(self) -> list[KeyRecord]:
        with self._guard():
            ids = sorted(self.r.smembers(PREFIX + "keys"))
            pipe = self.r.pipeline()
            for kid in ids:
                pipe.hgetall(f"{PREFIX}key:{kid}")
                pipe.hgetall(f"{PREFIX}usage:{kid}")
            got = pipe.execute()
        out = [self._record(kid, got[2 * i], got[2 * i + 1]) for i, kid in enumerate(ids) if got[2 * i]]
        return sorted(out, key=lambda r: (r.created, r.id))

    def revoke(self, key_or_id: str) -> KeyRecord:
        kid = key_id(key_or_id) if key_or_id.startswith("gk_") else key_or_id
        with self._guard():
            h = self.r.hgetall(f"{PREFIX}key:{kid}") if kid else {}
            if not h or (key_or_id.startswith("gk_") and not hash_matches(h["key_hash"], key_or_id)):
                raise NotFound("no such key")
            revoked = h.get("revoked") or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self.r.hset(f"{PREFIX}key:{kid}", "revoked", revoked)
        return self._record(kid, {**h, "revoked": revoked})

    def authenticate(self, key: str | None) -> KeyRecord | None:
        kid = key_id(key)
        with self._guard():
            h = self.r.hgetall(f"{PREFIX}key:{kid}") if kid else {}
        if not hash_matches(h.get("key_hash"), key) or h.get("revoked"):
            return None
        return self._record(kid, h)

    # -- quotas ----------------------------------------------------------------------------------
    def consume(self, record: KeyRecord, path: str, now: dt.datetime | None = None) -> None:
        """Count one request against every pool of the key's plan covering `path`: one atomic Lua call.
        QuotaExceeded (nothing counted) when a pool is used up; Unavailable when Redis is unreachable."""
        plan, pools = self.pools(record, path)
        if not pools:
            return
        now = now or dt.datetime.now(dt.UTC)
        args: list = [len(pools)]
        for pool in pools:
            label, _ = period_bounds(pool.period, now)
            args += [f"{pool.name}@{label}", pool.limit]
        with self._guard():
            full = int(self._consume(keys=[f"{PREFIX}usage:{record.id}"], args=args))
        if full:
            raise quota_exceeded(plan, pools[full - 1], now)

    def usage(self, key_id: str) -> dict:
        with self._guard():
            return {k: int(v) for k, v in self.r.hgetall(f"{PREFIX}usage:{key_id}").items()}


class RedisPublishableKeys:
    """Publishable keys (pk_...) in the gateway's Redis, next to its keys: `pkey:<id>` a hash (key_hash,
    plan, label, origins, scopes, created, revoked) and `pkeys` the set of ids. The interface of
    `publishable.PublishableKeys`; their requests are counted by the same Redis store (usage id pk_<id>)."""

    def __init__(self, store: RedisKeyStore):
        self.store = store
        self.r = store.r

    @property
    def plans(self):
        return self.store.plans

    @staticmethod
    def _record(kid: str, h: dict):
        from geoengine.gateway.publishable import PublishableKey

        return PublishableKey(kid, h.get("plan", ""), h.get("label", ""), tuple(json.loads(h.get("origins") or "[]")),
                              tuple(json.loads(h.get("scopes") or "[]")), h.get("created", ""), h.get("revoked") or None)

    def create(self, plan: str, origins, scopes, label: str = ""):
        from geoengine.gateway.publishable import check_new_key

        origins, scopes = check_new_key(self.plans, plan, origins, scopes)
        with self.store._guard():
            for _ in range(10):
                kid = secrets.token_hex(4)
                key = f"pk_{kid}_{secrets.token_urlsafe(24)}"
                name = f"{PREFIX}pkey:{kid}"
                if not self.r.hsetnx(name, "key_hash", _hash(key)):
                    continue
                fields = {"plan": plan, "label": label or "", "origins": json.dumps(origins),
                          "scopes": json.dumps(scopes), "revoked": "",
                          "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
                pipe = self.r.pipeline()
                pipe.hset(name, mapping=fields)
                pipe.sadd(PREFIX + "pkeys", kid)
                pipe.execute()
                return key, self._record(kid, fields)
        raise RuntimeError("could not allocate a key id")

    def list(self):
        with self.store._guard():
            ids = sorted(self.r.smembers(PREFIX + "pkeys"))
            pipe = self.r.pipeline()
            for kid in ids:
                pipe.hgetall(f"{PREFIX}pkey:{kid}")
            got = pipe.execute()
        out = [self._record(kid, h) for kid, h in zip(ids, got, strict=True) if h]
        return sorted(out, key=lambda p: (p.created, p.id))

    def revoke(self, key_or_id: str):
        kid = key_id(key_or_id, "pk_") if key_or_id.startswith("pk_") else key_or_id
        with self.store._guard():
            h = self.r.hgetall(f"{PREFIX}pkey:{kid}") if kid else {}
            if not h or (key_or_id.startswith("pk_") and not hash_matches(h["key_hash"], key_or_id)):
                raise NotFound("no such publishable key")
            revoked = h.get("revoked") or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self.r.hset(f"{PREFIX}pkey:{kid}", "revoked", revoked)
        return self._record(kid, {**h, "revoked": revoked})

    def authenticate(self, key: str | None):
        """The key's record when `key` is a known, unrevoked publishable key, else None (constant time);
        Unavailable (503) when Redis is unreachable."""
        kid = key_id(key, "pk_")
        with self.store._guard():
            h = self.r.hgetall(f"{PREFIX}pkey:{kid}") if kid else {}
        if not hash_matches(h.get("key_hash"), key) or h.get("revoked"):
            return None
        return self._record(kid, h)
