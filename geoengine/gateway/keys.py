"""The API-key gateway: keys (stored hashed in SQLite), plans, and exact quota counters.

Used by the HTTP façade's middleware and by `geoengine keys`. Standard library only, so the CLI can
manage keys without the optional server extra.

A key looks like `gk_<id>_<secret>`: `<id>` (8 hex characters) is its public handle for `keys list`
and `keys revoke`; only the SHA-256 of the whole key is stored, and it is compared in constant time.
Quota counters live in the same database and are incremented in one IMMEDIATE transaction per
request, so they are exact under concurrency (threads or worker processes) and survive restarts.
"""

from __future__ import annotations

import calendar
import datetime as dt
import hashlib
import hmac
import secrets
import sqlite3
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from geoengine.errors import InvalidRequest, NotFound, QuotaExceeded

# What a request to a path is, for the gateway: (quota class: tile | non_tile | routing, the publishable
# scope that may call it or None). The server's endpoint table says (server/endpoints.py `path_class`,
# handed over with `classify_paths` when the table is loaded); the gateway keeps no path list of its own.
_classify: Callable[[str], tuple[str, str | None]] | None = None


def classify_paths(classify: Callable[[str], tuple[str, str | None]]) -> None:
    """Install the function that gives a path's (quota class, publishable scope)."""
    global _classify
    _classify = classify


def path_class(path: str) -> tuple[str, str | None]:
    if _classify is None:
        raise RuntimeError("the gateway counts requests by the server's endpoint table (geoengine.server.endpoints)")
    return _classify(path)


def path_scopes(path: str) -> set[str]:
    """The pool scopes a request to `path` counts against (tile reads only `all`)."""
    quota = path_class(path)[0]
    return {"all"} if quota == "tile" else {"all", "non_tile", "routing"} if quota == "routing" else {"all", "non_tile"}


@dataclass(frozen=True)
class Pool:
    scope: str  # all | non_tile | routing
    period: str  # day | month (UTC)
    limit: int

    @property
    def name(self) -> str:
        return f"{self.scope}/{self.period}"


@dataclass(frozen=True)
class Plan:
    name: str
    pools: tuple[Pool, ...] = ()
    description: str = ""


DEFAULT_PLANS: dict[str, Plan] = {
    "free": Plan("free", (Pool("non_tile", "day", 1000),), "1,000 requests per UTC day over all non-tile endpoints"),
    "starter": Plan("starter", (Pool("routing", "month", 500),), "500 routing requests per calendar month (UTC)"),
    "unlimited": Plan("unlimited", (), "no quota"),
}

SCOPES = ("all", "non_tile", "routing")
PERIODS = ("day", "month")
# Permissions a key may carry (`keys create --scope`); `admin` is needed to clear a tile cache.
KEY_SCOPES = ("admin",)


def check_key_scopes(scopes) -> tuple[str, ...]:
    out = tuple(sorted({s.strip() for s in scopes or () if s and s.strip()}))
    bad = [s for s in out if s not in KEY_SCOPES]
    if bad:
        raise InvalidRequest.field("scope", f"unknown key scope '{bad[0]}'; scopes: {', '.join(KEY_SCOPES)}")
    return out


def load_plans(path: Path | None) -> dict[str, Plan]:
    """Plans from a TOML file (see docs/gateway.md), or the defaults."""
    if path is None:
        return dict(DEFAULT_PLANS)
    doc = tomllib.loads(Path(path).read_text())
    plans = {}
    for name, spec in doc.get("plans", {}).items():
        pools = []
        for i, p in enumerate(spec.get("pools", [])):
            scope, period, limit = p.get("scope"), p.get("period"), p.get("limit")
            if scope not in SCOPES or period not in PERIODS or not isinstance(limit, int) or limit < 0:
                raise ValueError(
                    f"{path}: plans.{name}.pools[{i}] needs scope in {SCOPES}, period in {PERIODS} and an integer limit >= 0"
                )
            pools.append(Pool(scope, period, limit))
        plans[name] = Plan(name, tuple(pools), spec.get("description", ""))
    if not plans:
        raise ValueError(f"{path} defines no [plans.NAME] table")
    return plans


def period_bounds(period: str, now: dt.datetime) -> tuple[str, dt.datetime]:
    """(label of the period containing `now`, start of the next period), in UTC."""
    now = now.astimezone(dt.UTC)
    if period == "day":
        label = now.strftime("%Y-%m-%d")
        nxt = dt.datetime(now.year, now.month, now.day, tzinfo=dt.UTC) + dt.timedelta(days=1)
    else:
        label = now.strftime("%Y-%m")
        days = calendar.monthrange(now.year, now.month)[1]
        nxt = dt.datetime(now.year, now.month, 1, tzinfo=dt.UTC) + dt.timedelta(days=days)
    return label, nxt


def quota_exceeded(plan: Plan, pool: Pool, now: dt.datetime) -> QuotaExceeded:
    """The 429 of a used-up pool, with Retry-After = seconds until it renews."""
    _, nxt = period_bounds(pool.period, now)
    retry = max(1, int((nxt - now).total_seconds()) + 1)
    what = "daily" if pool.period == "day" else "monthly"
    scope = {"non_tile": "non-tile", "routing": "routing", "all": ""}[pool.scope]
    return QuotaExceeded(
        f"the {what} pool of {pool.limit} {scope} requests of plan '{plan.name}' is used up; "
        f"it renews at {nxt.strftime('%Y-%m-%dT%H:%M:%SZ')}".replace("  ", " "),
        headers={"Retry-After": str(retry)},
    )


@dataclass(frozen=True)
class KeyRecord:
    id: str
    plan: str
    label: str
    created: str
    revoked: str | None = None
    usage: dict = field(default_factory=dict)
    scopes: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "plan": self.plan,
            "label": self.label,
            "created": self.created,
            "revoked": self.revoked,
            "usage": self.usage,
            "scopes": list(self.scopes),
        }


_SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (
    id TEXT PRIMARY KEY,
    key_hash TEXT NOT NULL,
    plan TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    created TEXT NOT NULL,
    revoked TEXT
);
CREATE TABLE IF NOT EXISTS usage (
    key_id TEXT NOT NULL,
    pool TEXT NOT NULL,
    period TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (key_id, pool, period)
);
"""

_DUMMY_HASH = hashlib.sha256(b"geoengine-no-such-key").hexdigest()


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def key_id(key: str | None, prefix: str = "gk_") -> str:
    """The id of a `<prefix><id>_<secret>` key (gateway keys gk_, publishable keys pk_), "" otherwise."""
    if key and key.startswith(prefix):
        parts = key.split("_", 2)
        if len(parts) == 3:
            return parts[1]
    return ""


def hash_matches(stored: str | None, key: str | None) -> bool:
    """Whether `key` hashes to `stored`, in constant time, also when nothing is stored (no such key)."""
    return hmac.compare_digest(stored or _DUMMY_HASH, _hash(key or "")) and stored is not None


class Quotas:
    """What every store shares of quotas: the pools of a key's plan that count a request to a path."""

    plans: dict[str, Plan]

    def counts(self, record: KeyRecord, path: str) -> bool:
        """Whether a request to `path` counts against any pool of the key's plan (so `consume` has work).
        Lets the gateway skip the thread hop of `consume` on uncounted paths such as tiles."""
        plan = self.plans.get(record.plan)
        if plan is None:
            return True  # consume raises the explanation
        scopes = path_scopes(path)
        return any(p.scope in scopes for p in plan.pools)

    def pools(self, record: KeyRecord, path: str) -> tuple[Plan, list[Pool]]:
        """(the key's plan, its pools that count a request to `path`); QuotaExceeded when the plan is gone."""
        plan = self.plans.get(record.plan)
        if plan is None:
            raise QuotaExceeded(f"the key's plan '{record.plan}' no longer exists", headers={"Retry-After": "86400"})
        scopes = path_scopes(path)
        return plan, [p for p in plan.pools if p.scope in scopes]


class KeyStore(Quotas):
    """Keys, plans and quota counters in one SQLite database. Safe to share between threads."""

    remote = False  # answers from a local file: the gateway may call it on the event loop

    def __init__(self, path: str | Path, plans: dict[str, Plan] | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.plans = plans or dict(DEFAULT_PLANS)
        self._local = threading.local()
        conn = self._conn()
        with conn:
            conn.executescript(_SCHEMA)
            cols = {r[1] for r in conn.execute("PRAGMA table_info(keys)")}
            if "scopes" not in cols:  # databases made before key scopes
                conn.execute("ALTER TABLE keys ADD COLUMN scopes TEXT NOT NULL DEFAULT ''")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=60000")
            self._local.conn = conn
        return conn

    # -- keys ------------------------------------------------------------------------------------
    def create(self, plan: str, label: str = "", scopes=()) -> tuple[str, KeyRecord]:
        if plan not in self.plans:
            raise InvalidRequest.field("plan", f"unknown plan '{plan}'; plans: {', '.join(sorted(self.plans))}")
        scopes = check_key_scopes(scopes)
        conn = self._conn()
        for _ in range(10):
            kid = secrets.token_hex(4)
            key = f"gk_{kid}_{secrets.token_urlsafe(24)}"
            created = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            try:
                conn.execute(
                    "INSERT INTO keys (id, key_hash, plan, label, created, scopes) VALUES (?, ?, ?, ?, ?, ?)",
                    (kid, _hash(key), plan, label or "", created, " ".join(scopes)),
                )
            except sqlite3.IntegrityError:
                continue
            return key, KeyRecord(kid, plan, label or "", created, scopes=scopes)
        raise RuntimeError("could not allocate a key id")

    def list(self) -> list[KeyRecord]:
        conn = self._conn()
        rows = conn.execute("SELECT id, plan, label, created, revoked, scopes FROM keys ORDER BY created, id").fetchall()
        usage: dict[str, dict] = {}
        for key_id, pool, period, count in conn.execute("SELECT key_id, pool, period, count FROM usage"):
            usage.setdefault(key_id, {})[f"{pool}@{period}"] = count
        return [KeyRecord(r[0], r[1], r[2], r[3], r[4], usage.get(r[0], {}), tuple(r[5].split())) for r in rows]

    def revoke(self, key_or_id: str) -> KeyRecord:
        kid = key_id(key_or_id) if key_or_id.startswith("gk_") else key_or_id
        conn = self._conn()
        row = conn.execute("SELECT id, key_hash, plan, label, created, revoked FROM keys WHERE id = ?", (kid,)).fetchone()
        if row is None or (key_or_id.startswith("gk_") and not hash_matches(row[1], key_or_id)):
            raise NotFound("no such key")
        revoked = row[5] or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        conn.execute("UPDATE keys SET revoked = ? WHERE id = ?", (revoked, kid))
        return KeyRecord(row[0], row[2], row[3], row[4], revoked)

    def authenticate(self, key: str | None) -> KeyRecord | None:
        """The key's record when `key` is known and not revoked, else None. Constant-time comparison."""
        kid = key_id(key)
        row = None
        if kid:
            row = self._conn().execute(
                "SELECT id, key_hash, plan, label, created, revoked, scopes FROM keys WHERE id = ?", (kid,)
            ).fetchone()
        if not hash_matches(row[1] if row else None, key) or row[5] is not None:
            return None
        return KeyRecord(row[0], row[2], row[3], row[4], row[5], scopes=tuple(row[6].split()))

    # -- quotas ----------------------------------------------------------------------------------
    def consume(self, record: KeyRecord, path: str, now: dt.datetime | None = None) -> None:
        """Count one request to `path` against every pool of the key's plan that covers it.

        Raises QuotaExceeded (with a Retry-After header) when any of those pools is used up; then
        nothing is counted. All pools are checked and incremented in one IMMEDIATE transaction.
        """
        plan, pools = self.pools(record, path)
        if not pools:
            return
        now = now or dt.datetime.now(dt.UTC)
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for pool in pools:
                label, _ = period_bounds(pool.period, now)
                row = conn.execute(
                    "SELECT count FROM usage WHERE key_id = ? AND pool = ? AND period = ?", (record.id, pool.name, label)
                ).fetchone()
                if (row[0] if row else 0) >= pool.limit:
                    conn.execute("ROLLBACK")
                    raise quota_exceeded(plan, pool, now)
            for pool in pools:
                label, _ = period_bounds(pool.period, now)
                conn.execute(
                    "INSERT INTO usage (key_id, pool, period, count) VALUES (?, ?, ?, 1) "
                    "ON CONFLICT (key_id, pool, period) DO UPDATE SET count = count + 1",
                    (record.id, pool.name, label),
                )
            conn.execute("COMMIT")
        except QuotaExceeded:
            raise
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def usage(self, key_id: str) -> dict:
        rows = self._conn().execute("SELECT pool, period, count FROM usage WHERE key_id = ?", (key_id,))
        return {f"{pool}@{period}": count for pool, period, count in rows}
