"""One typed settings object. Every setting is read from a `GEOENGINE_*` environment variable;
defaults live here and nowhere else. docs/settings.md documents each one (a test checks it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path


def data_path(relative: str) -> Path:
    """A file or folder of the project's `data/` (e.g. "search/categories.json"): `data/` beside the package
    in a checkout, `geoengine/_data/` in an installed wheel (pyproject.toml's shared-data)."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[1] / "data" / relative, here.parent / "_data" / relative):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"data/{relative} not found next to the geoengine package")


def _default_home() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "geoengine"


@dataclass(frozen=True)
class Setting:
    env: str
    help: str


# name -> (environment variable, help). The order is the order of the docs.
SETTINGS: dict[str, Setting] = {
    "home": Setting("GEOENGINE_HOME", "Folder for the download cache, bundles and state (default ~/.local/share/geoengine)."),
    "cache_dir": Setting("GEOENGINE_CACHE", "Download cache of region sources (default $GEOENGINE_HOME/cache)."),
    "bundles_dir": Setting("GEOENGINE_BUNDLES", "Where `geoengine build REGION` publishes bundles (default $GEOENGINE_HOME/bundles)."),
    "state": Setting("GEOENGINE_STATE", "SQLite state database of API keys and quota counters (default $GEOENGINE_HOME/state.sqlite3)."),
    "data_mirror": Setting("GEOENGINE_DATA_MIRROR", "A folder or http(s) base URL laid out like ../shared/data; fetch reads sources there instead of the public URLs."),
    "region": Setting("GEOENGINE_REGION", "Region that `geoengine serve` builds when no bundle is given (default andorra)."),
    "bundle": Setting("GEOENGINE_BUNDLE", "Bundle folder that the server opens (set by `geoengine serve --bundle`)."),
    "gateway_host": Setting("GEOENGINE_GATEWAY_HOST", "Value that every request's X-Gateway-Host header must equal (default localhost)."),
    "gateway_key_ttl_s": Setting("GEOENGINE_GATEWAY_KEY_TTL", "Seconds a serving process keeps an authenticated key (by its SHA-256, never the key) before reading the key store again: a revocation or plan change made elsewhere takes effect within this time; 0 reads the store on every request (default 5)."),
    "plans_file": Setting("GEOENGINE_PLANS_FILE", "TOML file that replaces the default plans (free, starter, unlimited); see docs/gateway.md."),
    "max_body_bytes": Setting("GEOENGINE_MAX_BODY_BYTES", "Largest request body accepted; larger bodies get 413 (default 2097152)."),
    "elevation_max_points": Setting("GEOENGINE_ELEVATION_MAX_POINTS", "Most points one POST /elevation may carry (default 2000)."),
    "tile_cache_bytes": Setting("GEOENGINE_TILE_CACHE_BYTES", "Byte budget of the in-memory tile cache (default 268435456)."),
    "search_cache_bytes": Setting("GEOENGINE_SEARCH_CACHE_BYTES", "Byte budget of a serving process's cache of search answers (plainly valid GET /search and /search/reverse, by path and query string; default 16777216, 0 turns it off); least recently used first out."),
    "tiles_dir": Setting("GEOENGINE_TILES_DIR", "Optional extra folder of .mbtiles/.pmtiles files served as tile sources."),
    "public_url": Setting("GEOENGINE_PUBLIC_URL", "Public base URL used in tile URLs (default: taken from the request, and from the forwarded headers of trusted proxies)."),
    "forwarded_allow_ips": Setting("GEOENGINE_FORWARDED_ALLOW_IPS", "Peers whose X-Forwarded-Proto/-Host/-Prefix/-For headers are believed: addresses or networks separated by commas, or * for any (default: none, forwarded headers are ignored)."),
    "redis_url": Setting("GEOENGINE_REDIS_URL", "redis:// URL of a Redis server holding the gateway's keys, plans and quota counters, shared by every replica (default: none, the SQLite GEOENGINE_STATE file)."),
    "request_timeout_s": Setting("GEOENGINE_REQUEST_TIMEOUT", "Seconds a routing computation may take before 504 (default 30)."),
    "search_places": Setting("GEOENGINE_SEARCH_PLACES", "GeoNames places a region build indexes: important (the region plus the world's capitals, admin seats and places of 50,000+; default), region, or all (the whole table)."),
    "cch_cache_bytes": Setting("GEOENGINE_CCH_CACHE_BYTES", "Byte budget of the router's cache of customised hierarchies for non-default costing options and avoid areas (default 1073741824); least recently used first out."),
    "speeds_dir": Setting("GEOENGINE_SPEEDS_DIR", "Folder of measured speeds (`geoengine speeds apply`, POST /admin/speeds): <dir>/<bundle name>.speeds/ (default: beside the bundle folder); see docs/traffic.md."),
    "speeds_spare": Setting("GEOENGINE_SPEEDS_SPARE", "Keep a spare set of the hierarchy's customisation arrays between customisations, so that new speeds reach routes sooner (at 64 copies of Liechtenstein 0.7 GB held per process, 2-3 s less per apply): auto (default: once the bundle has measured speeds), on, or off; see docs/traffic.md."),
    "workers": Setting("GEOENGINE_WORKERS", "Worker processes of `geoengine serve` when --workers is not given (default: the number of cores this process may use)."),
    "worker_state": Setting("GEOENGINE_WORKER_STATE", "File shared by the worker processes of one server (tile cache clears reach every worker); set by `geoengine serve` when it starts several workers."),
    "log_level": Setting("GEOENGINE_LOG_LEVEL", "Log level of the server (default info)."),
    "cors_origins": Setting("GEOENGINE_CORS_ORIGINS", "Comma-separated origins (scheme://host[:port]) whose pages may call the API from a browser: CORS answers and publishable keys; default none."),
    "session_plan": Setting("GEOENGINE_SESSION_PLAN", "Plan that each page session of the map page (GET /) is counted on, like a key (default free)."),
    "session_ttl_s": Setting("GEOENGINE_SESSION_TTL", "Lifetime in seconds of a page session cookie (default 3600)."),
    "session_rate": Setting("GEOENGINE_SESSION_RATE", "Requests per minute one page session may make, tiles included, before 429 (default 600)."),
    "web_assets": Setting("GEOENGINE_WEB_ASSETS", "Folder of the map page's installed assets (web/ of the source tree, filled by ./dev setup: node_modules and built glyphs and sprites)."),
}


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=_default_home)
    cache_dir: Path | None = None
    bundles_dir: Path | None = None
    state: Path | None = None
    data_mirror: str | None = None
    region: str = "andorra"
    bundle: Path | None = None
    gateway_host: str = "localhost"
    gateway_key_ttl_s: float = 5.0
    plans_file: Path | None = None
    max_body_bytes: int = 2 * 1024 * 1024
    elevation_max_points: int = 2000
    tile_cache_bytes: int = 256 * 1024 * 1024
    search_cache_bytes: int = 16 * 1024 * 1024
    tiles_dir: Path | None = None
    public_url: str | None = None
    forwarded_allow_ips: str | None = None
    redis_url: str | None = None
    request_timeout_s: float = 30.0
    search_places: str = "important"
    cch_cache_bytes: int = 1 << 30
    speeds_dir: Path | None = None
    speeds_spare: str = "auto"
    workers: int | None = None
    worker_state: Path | None = None
    log_level: str = "info"
    cors_origins: str | None = None
    session_plan: str = "free"
    session_ttl_s: int = 3600
    session_rate: int = 600
    web_assets: Path | None = None

    def __post_init__(self):
        home = Path(self.home)
        object.__setattr__(self, "home", home)
        if self.cache_dir is None:
            object.__setattr__(self, "cache_dir", home / "cache")
        if self.bundles_dir is None:
            object.__setattr__(self, "bundles_dir", home / "bundles")
        if self.state is None:
            object.__setattr__(self, "state", home / "state.sqlite3")
        if self.speeds_spare not in ("auto", "on", "off"):
            raise ValueError(f"GEOENGINE_SPEEDS_SPARE must be auto, on or off, got {self.speeds_spare!r}")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None, **overrides) -> Settings:
        env = os.environ if env is None else env
        kwargs = {}
        types = {f.name: f.type for f in fields(cls)}
        for name, setting in SETTINGS.items():
            raw = env.get(setting.env)
            if raw is None or raw == "":
                continue
            kind = types[name]
            if "Path" in str(kind):
                kwargs[name] = Path(raw).expanduser()
            elif "int" in str(kind):
                try:
                    kwargs[name] = int(raw)
                except ValueError as exc:
                    raise ValueError(f"{setting.env} must be an integer, got {raw!r}") from exc
            elif "float" in str(kind):
                try:
                    kwargs[name] = float(raw)
                except ValueError as exc:
                    raise ValueError(f"{setting.env} must be a number, got {raw!r}") from exc
            else:
                kwargs[name] = raw
        kwargs.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**kwargs)

    def to_env(self) -> dict[str, str]:
        """The environment that reproduces these settings (for server worker processes)."""
        out = {}
        for name, setting in SETTINGS.items():
            value = getattr(self, name)
            if value is not None:
                out[setting.env] = str(value)
        return out
