"""Page sessions: a signed, short-lived cookie that the server issues with its own map page.

The cookie value is `<sid>.<expires>.<signature>`: a random session id, the Unix expiry time and an
HMAC-SHA256 over both with the deployment's session secret. The secret is made once and kept in the
state database, so every worker process (and a restart) accepts the same cookies. The cookie is
HttpOnly (scripts never read it), SameSite=Strict and Path=/; the page never sees an API key.

Each session is counted like a key on a configurable plan (its usage id is `ws_<sid>`) and has its own
per-minute rate limit, kept in memory per worker process.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import threading
import time
from collections import OrderedDict
from pathlib import Path

COOKIE = "geoengine_session"

_SCHEMA = "CREATE TABLE IF NOT EXISTS web_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)"


def load_secret(state: Path) -> bytes:
    """The deployment's session secret, created on first use in the state database (race-free)."""
    state = Path(state)
    state.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(state, timeout=60.0, isolation_level=None)
    try:
        conn.execute("PRAGMA busy_timeout=60000")
        conn.execute(_SCHEMA)
        conn.execute("INSERT OR IGNORE INTO web_secrets (name, value) VALUES ('session', ?)", (secrets.token_hex(32),))
        (value,) = conn.execute("SELECT value FROM web_secrets WHERE name = 'session'").fetchone()
    finally:
        conn.close()
    return bytes.fromhex(value)


class SessionSigner:
    def __init__(self, secret: bytes, ttl_s: int):
        self.secret = secret
        self.ttl_s = int(ttl_s)

    def _sign(self, sid: str, exp: int) -> str:
        return hmac.new(self.secret, f"{sid}.{exp}".encode(), hashlib.sha256).hexdigest()[:40]

    def issue(self, now: float | None = None) -> tuple[str, str]:
        """(cookie value, session id) of a new session."""
        sid = secrets.token_hex(8)
        exp = int((now or time.time()) + self.ttl_s)
        return f"{sid}.{exp}.{self._sign(sid, exp)}", sid

    def verify(self, value: str | None, now: float | None = None) -> str | None:
        """The session id when `value` is a well-signed, unexpired cookie value, else None."""
        hit = self.verified(value, now)
        return None if hit is None else hit[0]

    def verified(self, value: str | None, now: float | None = None) -> tuple[str, int] | None:
        """(session id, expiry) of a well-signed, unexpired cookie value, else None."""
        if not value:
            return None
        parts = value.split(".")
        if len(parts) != 3 or len(parts[0]) != 16 or not parts[1].isdigit():
            return None
        sid, exp, sig = parts[0], int(parts[1]), parts[2]
        if not hmac.compare_digest(sig, self._sign(sid, exp)) or exp < (now or time.time()):
            return None
        return sid, exp

    def cookie_header(self, value: str, secure: bool) -> bytes:
        attrs = [f"{COOKIE}={value}", "Path=/", f"Max-Age={self.ttl_s}", "HttpOnly", "SameSite=Strict"]
        if secure:
            attrs.append("Secure")
        return "; ".join(attrs).encode()


class RateLimiter:
    """At most `per_minute` requests per session in each fixed minute window (per worker process)."""

    def __init__(self, per_minute: int, max_sessions: int = 100_000):
        self.per_minute = int(per_minute)
        self.max_sessions = max_sessions
        self._windows: OrderedDict[str, list] = OrderedDict()
        self._lock = threading.Lock()

    def hit(self, sid: str, now: float | None = None) -> int:
        """0 when the request is allowed, else the seconds until the window renews."""
        now = now or time.time()
        window = int(now // 60)
        with self._lock:
            w = self._windows.get(sid)
            if w is None or w[0] != window:  # a session's window (re)starts: it goes to the end
                w = [window, 0]
                self._windows[sid] = w
                self._windows.move_to_end(sid)  # (once a minute per session, not per request)
                while len(self._windows) > self.max_sessions:  # the oldest windows first
                    self._windows.popitem(last=False)
            if w[1] >= self.per_minute:
                return max(1, int((window + 1) * 60 - now) + 1)
            w[1] += 1
            return 0


def read_cookie(headers) -> str | None:
    """The session cookie's value from raw ASGI headers."""
    for name, value in headers:
        if name == b"cookie":
            for part in value.decode("latin-1").split(";"):
                k, _, v = part.strip().partition("=")
                if k == COOKIE:
                    return v
    return None
