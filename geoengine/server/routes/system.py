"""GET /health: its response model and document (the route: server/endpoints.py)."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, Field

from geoengine.engine import Engine


class Health(BaseModel):
    status: str = Field(description="`ok` while the process serves requests")
    uptime: str = Field(description="Elapsed time since start, as text, e.g. `0:12:03` or `2 days, 3:04:05`")
    uptime_s: float = Field(description="Elapsed time since start in seconds")
    version: str = Field(description="geoengine version")
    region: str | None = Field(description="Region of the served bundle")
    stages: list[str] = Field(description="Build stages present in the served bundle")
    speeds: dict | None = Field(None, description="The measured speeds in force (docs/traffic.md): generation, "
                                "source, sha256, form, rows, edges, applied_at; null when none were ever applied; "
                                "`file` null after a reset")
    profiles: dict | None = Field(None, description="The time-of-day profiles in force (docs/traffic.md): generation, "
                                  "source, form, rows, edges, profiles, bytes, applied_at; null when none were ever applied")
    data_timestamp: str | None = Field(None, description="Timestamp of the served OpenStreetMap data (ISO 8601, UTC): "
                                       "the extract's replication timestamp, advanced by `geoengine update`")
    data_age_s: float | None = Field(None, description="Seconds since `data_timestamp`")
    replication_sequence: int | None = Field(None, description="Replication sequence number of the served data, "
                                             "when it came from a replication stream")


def health_doc(engine: Engine, params=None) -> dict:
    """The body of GET /health (the route, the hot path and the front door write it)."""
    info = engine.info()
    up = engine.uptime_seconds()
    return {"status": "ok", "uptime": str(timedelta(seconds=int(up))), "uptime_s": round(up, 3), "version": info["geoengine_version"],
            "region": info["region"], "stages": info["stages"], "speeds": info.get("speeds"), "profiles": info.get("profiles"),
            "data_timestamp": info["data_timestamp"], "data_age_s": info["data_age_s"],
            "replication_sequence": info["replication_sequence"]}

