"""The API-key gateway: keys, plans and exact quota counters (`keys`), the server's short-lived cache of
authenticated keys (`cache`), the shared gateway state in Redis (`store`), and publishable keys for web
pages (`publishable`). Standard library only (Redis through `redis` when configured), so the CLI manages
keys without the server; nothing here imports `geoengine.server` (tests/test_architecture.py), which
hands the gateway what a path is (its quota class and publishable scope) from its endpoint table
(`classify_paths`): the gateway keeps no path list.

The names of `keys` are re-exported here (`from geoengine.gateway import KeyStore, load_plans`)."""

from geoengine.gateway.keys import (
    DEFAULT_PLANS,
    KEY_SCOPES,
    PERIODS,
    SCOPES,
    KeyRecord,
    KeyStore,
    Plan,
    Pool,
    check_key_scopes,
    classify_paths,
    hash_matches,
    key_id,
    load_plans,
    path_class,
    path_scopes,
    period_bounds,
    quota_exceeded,
)

__all__ = [
    "DEFAULT_PLANS", "KEY_SCOPES", "PERIODS", "SCOPES", "KeyRecord", "KeyStore", "Plan", "Pool", "check_key_scopes",
    "classify_paths", "hash_matches", "key_id", "load_plans", "path_class", "path_scopes", "period_bounds",
    "quota_exceeded",
]
