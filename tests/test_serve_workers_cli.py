"""`geoengine serve --workers`: defaults to the usable cores (or GEOENGINE_WORKERS); 0 is a usage error."""

from __future__ import annotations

import os

from geoengine import cli


def test_default_workers_is_the_usable_cores():
    assert cli.default_workers() == len(os.sched_getaffinity(0))


def test_zero_workers_is_refused_before_any_build(tmp_path, monkeypatch, capsys):
    import pytest

    monkeypatch.setenv("GEOENGINE_HOME", str(tmp_path))
    with pytest.raises(SystemExit) as exc:  # a usage error from the argument parser: exit status 2
        cli.main(["serve", "--workers", "0", "--bundle", str(tmp_path / "none")])
    assert exc.value.code == 2
    assert "--workers: 0 is not at least 1" in capsys.readouterr().err
    assert not (tmp_path / "bundles").exists()


def test_serve_help_names_the_default(capsys):
    try:
        cli.main(["serve", "--help"])
    except SystemExit:
        pass
    out = capsys.readouterr().out
    assert "--workers" in out and "cores" in out
