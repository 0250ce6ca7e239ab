"""Fixtures of the update tests: the Liechtenstein extract, a new version of it with real edits and
the change file between them (tests/update/edits.py), the bundle of the old version built once per
session, and published copies of it (hard links) that a test may update."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from geoengine.bundler.pipeline import BuildInputs, build, publish
from geoengine.config import Settings
from geoengine.progress import NullProgress
from tests.conftest import data_file

from .edits import make_versions

EXTRACT = "liechtenstein/valhalla-liechtenstein-latest.osm.pbf"


@pytest.fixture(scope="session")
def upd_settings(tmp_path_factory) -> Settings:
    return Settings(home=tmp_path_factory.mktemp("update-home"), gateway_host="maps.example.test")


@pytest.fixture(scope="session")
def edits(tmp_path_factory) -> dict:
    return make_versions(data_file(EXTRACT), tmp_path_factory.mktemp("edits"))


@pytest.fixture(scope="session")
def old_bundle(tmp_path_factory, upd_settings) -> Path:
    """The bundle of the unedited extract (built from the file, as `geoengine build FILE` does)."""
    out = tmp_path_factory.mktemp("old") / "li"
    return build(BuildInputs(osm=data_file(EXTRACT)), out, upd_settings, progress=NullProgress())


def linked_copy(src: Path, dst: Path) -> Path:
    """A copy of a bundle made of hard links (a bundle's files are never changed in place)."""
    return Path(shutil.copytree(os.path.realpath(src), dst, copy_function=os.link))


def publish_copy(src: Path, root: Path) -> Path:
    """`root/bundles/li`: a published bundle (a symlink to a version folder), a hard-linked copy of `src`."""
    out = root / "bundles" / "li"
    out.parent.mkdir(parents=True, exist_ok=True)
    return publish(linked_copy(src, root / "copy"), out)


def archive_tiles(bundle: Path) -> dict[tuple, bytes]:
    """Every tile of a bundle's MBTiles archive: (zoom, column, row) -> its bytes."""
    (path,) = (bundle / "tiles").glob("*.mbtiles")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return {(z, x, y): bytes(d) for z, x, y, d in
                db.execute("SELECT zoom_level, tile_column, tile_row, tile_data FROM tiles")}
