"""Publishable keys: API keys meant to sit in a web page on another origin.

A publishable key looks like `pk_<id>_<secret>`. Unlike a gateway key (`gk_...`) it is expected to be
seen by anyone who opens the page, so it is only accepted
- from a browser request whose `Origin` is one of the key's origins (and in the server's CORS
  allow-list, GEOENGINE_CORS_ORIGINS), and
- on the paths of its scopes: `tiles` (`/sources`, `/tiles/...`) and `search` (`/search...` and the
  geocoding dialects' `/reverse`, `/lookup`, `/details`, `/photon/api`, `/photon/reverse`).
It is counted on its plan like any key (the same usage table, under the id `pk_<id>`).

Stored hashed in the same SQLite state database as the gateway keys, or, when GEOENGINE_REDIS_URL is set,
in the same Redis as the gateway keys (`geoengine.gateway.store.RedisPublishableKeys`), so every replica knows
every key and counts it in one place. Standard library only, so the CLI can manage publishable keys
without the server extra.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from geoengine.errors import InvalidRequest, NotFound
from geoengine.gateway.keys import _hash, hash_matches, key_id, path_class

SCOPES = ("tiles", "search")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS publishable_keys (
    id TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL,
    plan TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    origins TEXT NOT NULL,
    scopes TEXT NOT NULL,
    created TEXT NOT NULL,
    revoked TEXT
);
"""

def normalise_origin(origin: str) -> str:
    """`scheme://host[:port]` in lower case without a trailing slash; ValueError when it is not one."""
    text = origin.strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query or parts.fragment:
        raise ValueError(f"not an origin (scheme://host[:port]): {origin!r}")
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname.lower()}{port}"


def parse_origins(text: str | None) -> frozenset[str]:
    """The CORS allow-list from a comma-separated setting; empty (nothing allowed) by default."""
    if not text:
        return frozenset()
    return frozenset(normalise_origin(o) for o in text.split(",") if o.strip())


def path_scope(path: str) -> str | None:
    """The publishable scope a path belongs to, or None when no publishable key may call it (the
    endpoint table's, through `keys.path_class`)."""
    return path_class(path)[1]


@dataclass(frozen=True)
class PublishableKey:
    id: str
    plan: str
    label: str
    origins: tuple[str, ...]
    scopes: tuple[str, ...]
    created: str
    revoked: str | None = None

    @property
    def usage_id(self) -> str:
        """The id its requests are counted under in the gateway's usage table."""
        return f"pk_{self.id}"

    def as_dict(self) -> dict:
        return {"id": self.id, "plan": self.plan, "label": self.label, "origins": list(self.origins),
                "scopes": list(self.scopes), "created": self.created, "revoked": self.revoked}


def check_new_key(plans, plan: str, origins, scopes) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(origins, scopes) of a key to create, normalised; InvalidRequest naming the bad part."""
    if plans is not None and plan not in plans:
        raise InvalidRequest.field("plan", f"unknown plan '{plan}'; plans: {', '.join(sorted(plans))}")
    try:
        origins = tuple(sorted({normalise_origin(o) for o in origins}))
    except ValueError as exc:
        raise InvalidRequest.field("origin", str(exc)) from None
    if not origins:
        raise InvalidRequest.field("origin", "a publishable key needs at least one origin")
    scopes = tuple(sorted(set(scopes)))
    bad = [s for s in scopes if s not in SCOPES]
    if bad or not scopes:
        raise InvalidRequest.field("scope", f"scopes must be among {', '.join(SCOPES)}; got {', '.join(bad) or 'none'}")
    return origins, scopes


class PublishableKeys:
    """Publishable keys in the state database. Safe to share between threads. With GEOENGINE_REDIS_URL
    they live in Redis instead (`geoengine.gateway.store.RedisPublishableKeys`, same interface): see
    `geoengine.gateway.store.open_publishable`."""

    def __init__(self, path: str | Path, plans=None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.plans = plans
        self._local = threading.local()
        with self._conn() as conn:
            conn.executescript(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout=60000")
            self._local.conn = conn
        return conn

    def create(self, plan: str, origins, scopes, label: str = "") -> tuple[str, PublishableKey]:
        origins, scopes = check_new_key(self.plans, plan, origins, scopes)
        conn = self._conn()
        for _ in range(10):
            kid = secrets.token_hex(4)
            key = f"pk_{kid}_{secrets.token_urlsafe(24)}"
            created = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            try:
                conn.execute(
                    "INSERT INTO publishable_keys (id, key_hash, plan, label, origins, scopes, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (kid, _hash(key), plan, label or "", json.dumps(origins), json.dumps(scopes), created),
                )
            except sqlite3.IntegrityError:
                continue
            return key, PublishableKey(kid, plan, label or "", origins, scopes, created)
        raise RuntimeError("could not allocate a key id")

    def _record(self, row) -> PublishableKey:
        return PublishableKey(row[0], row[2], row[3], tuple(json.loads(row[4])), tuple(json.loads(row[5])), row[6], row[7])

    def list(self) -> list[PublishableKey]:
        rows = self._conn().execute(
            "SELECT id, key_hash, plan, label, origins, scopes, created, revoked FROM publishable_keys ORDER BY created, id")
        return [self._record(r) for r in rows]

    def revoke(self, key_or_id: str) -> PublishableKey:
        kid = key_id(key_or_id, "pk_") if key_or_id.startswith("pk_") else key_or_id
        conn = self._conn()
        row = conn.execute("SELECT id, key_hash, plan, label, origins, scopes, created, revoked "
                           "FROM publishable_keys WHERE id = ?", (kid,)).fetchone()
        if row is None or (key_or_id.startswith("pk_") and not hash_matches(row[1], key_or_id)):
            raise NotFound("no such publishable key")
        revoked = row[7] or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        conn.execute("UPDATE publishable_keys SET revoked = ? WHERE id = ?", (revoked, kid))
        return self._record((*row[:7], revoked))

    def authenticate(self, key: str | None) -> PublishableKey | None:
        """The key's record when `key` is a known, unrevoked publishable key, else None (constant time)."""
        kid = key_id(key, "pk_")
        row = None
        if kid:
            row = self._conn().execute("SELECT id, key_hash, plan, label, origins, scopes, created, revoked "
                                       "FROM publishable_keys WHERE id = ?", (kid,)).fetchone()
        if not hash_matches(row[1] if row else None, key) or row[7] is not None:
            return None
        return self._record(row)
