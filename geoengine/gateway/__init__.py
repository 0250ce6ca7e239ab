"""The API-key gateway: keys, plans and exact quota counters (`keys`), the server's short-lived cache of
authenticated keys (`cache`), the shared gateway state in Redis (`store`), and publishable keys for web
pages (`publishable`). Standard library only (Redis through `redis` when configured), so the CLI manages
keys without the server; nothing here imports `geoengine.server` (tests/test_architecture.py).

The names of `keys` are re-exported here (`from geoengine.gateway import KeyStore, load_plans`)."""

from geoengine.gateway.keys import (
    DEFAULT_PLANS,
    KEY_SCOPES,
    OSRM_ROUTING_PREFIXES,
    PERIODS,
    ROUTING_PATHS,
    SCOPES,
    UNAUTHORIZED_401_PATHS,
    KeyRecord,
    KeyStore,
    Plan,
    Pool,
    auth_failure_status,
    check_key_scopes,
    hash_matches,
    is_tile_path,
    key_id,
    load_plans,
    path_scopes,
    period_bounds,
    quota_exceeded,
)

__all__ = [
    "DEFAULT_PLANS", "KEY_SCOPES", "OSRM_ROUTING_PREFIXES", "PERIODS", "ROUTING_PATHS", "SCOPES",
    "UNAUTHORIZED_401_PATHS", "KeyRecord", "KeyStore", "Plan", "Pool", "auth_failure_status", "check_key_scopes",
    "hash_matches", "is_tile_path", "key_id", "load_plans", "path_scopes", "period_bounds", "quota_exceeded",
]
