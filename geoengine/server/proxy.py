"""Forwarded headers (X-Forwarded-Proto, -Host, -Prefix, -For) honoured only from trusted proxies.

`GEOENGINE_FORWARDED_ALLOW_IPS` lists the peers whose forwarded headers are believed: addresses and
networks separated by commas (`127.0.0.1,10.0.0.0/8`), or `*` for any peer. The default is none, so a
client cannot rewrite the tile URLs that /sources and TileJSON hand to everyone else by sending
`X-Forwarded-Host`. This is uvicorn's `--forwarded-allow-ips` rule; `geoengine serve` turns uvicorn's
own proxy handling off and lets server/admission.py do it, so there is one rule in one place.

From a trusted peer `apply_forwarded` sets `scope["scheme"]` and `scope["client"]` like uvicorn does and
keeps the forwarded host and prefix in `scope["state"]["forwarded"]` for `routes/tiles.base_url`.
"""

from __future__ import annotations

import ipaddress


class TrustedProxies:
    """Which peers are trusted proxies: `*`, or a set of addresses and networks."""

    def __init__(self, spec: str | None):
        self.any = False
        self.networks: list = []
        self.names: set[str] = set()
        for item in (spec or "").split(","):
            item = item.strip()
            if not item:
                continue
            if item == "*":
                self.any = True
                continue
            try:
                self.networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                self.names.add(item)  # a non-IP peer name (a unix socket path, "testclient")

    def __bool__(self) -> bool:
        return self.any or bool(self.networks) or bool(self.names)

    def trusts(self, peer: str | None) -> bool:
        if self.any:
            return True
        if not peer:
            return False
        if peer in self.names:
            return True
        try:
            ip = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(ip in net for net in self.networks)


def _first(value: bytes) -> str:
    return value.decode("latin-1").split(",")[0].strip()


def apply_forwarded(scope, trusted: TrustedProxies) -> None:
    """Apply the forwarded headers of a request from a trusted peer (server/admission.py)."""
    client = scope.get("client")
    if not trusted.trusts(client[0] if client else None):
        return
    fwd: dict[str, str] = {}
    for name, value in scope["headers"]:
        if name == b"x-forwarded-proto":
            proto = _first(value).lower()
            if proto in ("http", "https", "ws", "wss"):
                scope["scheme"] = proto
        elif name == b"x-forwarded-host":
            fwd["host"] = _first(value)
        elif name == b"x-forwarded-prefix":
            fwd["prefix"] = _first(value)
        elif name == b"x-forwarded-for":
            hosts = [h.strip() for h in value.decode("latin-1").split(",") if h.strip()]
            # the nearest address that is not itself a trusted proxy is the client
            for h in reversed(hosts):
                if not trusted.trusts(h) or h == hosts[0]:
                    scope["client"] = (h, 0)
                    break
    scope.setdefault("state", {})["forwarded"] = fwd
