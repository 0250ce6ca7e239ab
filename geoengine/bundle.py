"""A bundle: an immutable folder of build outputs with a `manifest.json`.

Layout: `manifest.json` plus one sub-folder per build stage (`source/`, `graph/`, `search/`,
`tiles/`, `elevation/`). `Bundle.open` checks the manifest before anything is loaded and names
what is missing or was built by an incompatible version.
"""

from __future__ import annotations

import json
import mmap
from dataclasses import dataclass
from pathlib import Path

from geoengine.errors import BundleError

FORMAT = "geoengine-bundle"
FORMAT_VERSION = 1

# Version of each stage's output format that this code reads. A stage that changes what it writes
# bumps its number here; bundles built with another number are refused with a clear message.
STAGE_VERSIONS: dict[str, int] = {
    "source": 1,
    "graph": 2,
    "elevation": 2,
    "routing": 4,
    "search": 1,
    "tiles": 1,
}


@dataclass(frozen=True)
class Bundle:
    path: Path
    manifest: dict

    @classmethod
    def open(cls, path: str | Path) -> Bundle:
        path = Path(path).expanduser()
        if not path.exists():
            raise BundleError(f"bundle folder {path} does not exist; make one with `geoengine build REGION`")
        if not path.is_dir():
            raise BundleError(f"{path} is not a folder; a bundle is a folder made by `geoengine build`")
        path = path.resolve()
        mpath = path / "manifest.json"
        if not mpath.exists():
            raise BundleError(f"{path} has no manifest.json: it is not a finished bundle (rebuild with `geoengine build`)")
        try:
            manifest = json.loads(mpath.read_text())
        except (OSError, ValueError) as exc:
            raise BundleError(f"{mpath} cannot be read: {exc}") from exc
        check_manifest(path, manifest)
        return cls(path=path, manifest=manifest)

    @property
    def stages(self) -> dict[str, dict]:
        return self.manifest.get("stages", {})

    def has_stage(self, name: str) -> bool:
        return name in self.stages

    def stage_dir(self, name: str) -> Path:
        if name not in self.stages:
            raise BundleError(f"bundle {self.path} has no '{name}' stage; rebuild it with a geoengine that builds {name}")
        return self.path / name

    @property
    def bbox(self) -> tuple[float, float, float, float] | None:
        bbox = self.manifest.get("bbox")
        return tuple(bbox) if bbox else None

    @property
    def region(self) -> str | None:
        return self.manifest.get("region")


def is_mapped(a) -> bool:
    """True when array `a` reads a memory-mapped file (an np.memmap, or a plain ndarray view of one, as
    the graph and hierarchy arrays are held so that indexing them costs no Python code)."""
    import numpy as np

    base = a
    while base is not None:
        if isinstance(base, (np.memmap, mmap.mmap)):
            return True
        base = getattr(base, "base", None)
    return False


def check_manifest(path: Path, manifest: dict) -> None:
    """Raise BundleError naming the first problem: wrong format, incompatible version, missing output."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{path}/manifest.json is not a geoengine bundle manifest")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise BundleError(
            f"bundle {path} has format version {version} (built by geoengine "
            f"{manifest.get('geoengine_version', '?')}); this geoengine reads version {FORMAT_VERSION}: rebuild it"
        )
    stages = manifest.get("stages")
    if not isinstance(stages, dict):
        raise BundleError(f"{path}/manifest.json lists no stages")
    for name, info in stages.items():
        want = STAGE_VERSIONS.get(name)
        if want is None:
            raise BundleError(
                f"bundle {path} has a '{name}' stage that this geoengine does not know (built by geoengine "
                f"{manifest.get('geoengine_version', '?')}): upgrade geoengine or rebuild the bundle"
            )
        got = info.get("version")
        if got != want:
            raise BundleError(
                f"stage '{name}' of bundle {path} was built in format {got} by geoengine "
                f"{manifest.get('geoengine_version', '?')}; this geoengine reads format {want}: rebuild the bundle"
            )
        for rel in info.get("outputs", []):
            if not (path / rel).exists():
                raise BundleError(f"bundle {path} is incomplete: stage '{name}' output {rel} is missing")
