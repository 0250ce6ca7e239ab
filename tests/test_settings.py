"""Every setting has one default, is read from its GEOENGINE_* variable, and is documented."""

from pathlib import Path

import pytest

from geoengine.config import SETTINGS, Settings

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_every_setting_is_documented():
    text = (DOCS / "settings.md").read_text()
    for setting in SETTINGS.values():
        assert f"`{setting.env}`" in text, f"{setting.env} is not in docs/settings.md"


def test_settings_from_env(tmp_path):
    s = Settings.from_env({"GEOENGINE_HOME": str(tmp_path), "GEOENGINE_MAX_BODY_BYTES": "123",
                           "GEOENGINE_GATEWAY_HOST": "h.example"})
    assert s.home == tmp_path and s.state == tmp_path / "state.sqlite3" and s.cache_dir == tmp_path / "cache"
    assert s.max_body_bytes == 123 and s.gateway_host == "h.example"
    assert Settings.from_env({**s.to_env()}) == s
    with pytest.raises(ValueError, match="GEOENGINE_MAX_BODY_BYTES must be an integer"):
        Settings.from_env({"GEOENGINE_MAX_BODY_BYTES": "lots"})
