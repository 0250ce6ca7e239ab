"""`publish(..., keep_replaced=True)` (geoengine update): the replaced version stays for servers that
have not switched yet, and goes at the next such publication; a plain publication removes it (and any older) at once."""

from __future__ import annotations

import os

from geoengine.bundler.pipeline import _version_dirs, publish


def _work(tmp_path, name):
    d = tmp_path / name
    d.mkdir()
    (d / "manifest.json").write_text(name)
    return d


def test_an_update_keeps_the_replaced_version_until_the_next_one(tmp_path):
    out = tmp_path / "bundles" / "x"
    out.parent.mkdir()
    publish(_work(tmp_path, "v1"), out)
    v1 = os.path.realpath(out)
    publish(_work(tmp_path, "v2"), out, keep_replaced=True)
    v2 = os.path.realpath(out)
    assert (out / "manifest.json").read_text() == "v2" and os.path.isdir(v1)
    assert sorted(map(str, _version_dirs(out))) == sorted([v1, v2])
    publish(_work(tmp_path, "v3"), out, keep_replaced=True)
    v3 = os.path.realpath(out)
    assert not os.path.exists(v1) and os.path.isdir(v2)
    assert sorted(map(str, _version_dirs(out))) == sorted([v2, v3])
    publish(_work(tmp_path, "v4"), out)  # a build: the replaced version (and the kept one) go at once
    assert not os.path.exists(v3) and not os.path.exists(v2) and (out / "manifest.json").read_text() == "v4"
    assert list(map(str, _version_dirs(out))) == [os.path.realpath(out)]
