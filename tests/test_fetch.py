"""The downloader against a loopback HTTP server serving ../shared/data: success, resume, and the
failure cases (404, truncated response, checksum mismatch) each with a clear error and no file left
under its final name."""

from __future__ import annotations

import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from geoengine.bundler.fetch import SourceFile, download, fetch_file, fetch_region, load_regions, sha256_file
from geoengine.config import Settings
from geoengine.errors import FetchError

from .conftest import SHARED_DATA


class MirrorHandler(SimpleHTTPRequestHandler):
    """Serves the data folder with Range support; /truncated/<path> cuts the body in half,
    /corrupt/<path> flips a byte in the middle."""

    ranges_seen: list = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.lstrip("/")
        mode = None
        for prefix in ("truncated/", "corrupt/"):
            if path.startswith(prefix):
                mode, path = prefix[:-1], path[len(prefix):]
        file = Path(self.directory) / path
        if not file.is_file():
            self.send_error(404, "Not Found")
            return
        data = file.read_bytes()
        start = 0
        rng = self.headers.get("Range")
        if rng:
            MirrorHandler.ranges_seen.append(rng)
            start = int(rng.split("=")[1].split("-")[0])
        if mode == "corrupt":
            mid = len(data) // 2
            data = data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1:]
        body = data[start:]
        self.send_response(206 if rng else 200)
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if mode == "truncated" and not rng:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


@pytest.fixture(scope="module")
def mirror_url():
    handler = partial(MirrorHandler, directory=str(SHARED_DATA))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


PBF = "andorra/andorra.osm.pbf"


def _andorra_osm() -> SourceFile:
    return load_regions().get("andorra").files_for("osm")[0]


def test_catalog_lists_the_sample_regions():
    catalog = load_regions()
    assert catalog.default == "andorra"
    assert {"andorra", "monaco", "liechtenstein", "helsinki"} <= set(catalog.regions)
    for region in catalog.regions.values():
        assert region.files_for("osm"), region.name
        for f in region.files:
            assert f.url.startswith("https://"), f
            assert (SHARED_DATA / f.path).exists(), f"{f.path} is not laid out like ../shared/data"
            assert f.size == (SHARED_DATA / f.path).stat().st_size


def test_http_download_verifies_and_renames(tmp_path, mirror_url):
    f = _andorra_osm()
    dest = tmp_path / "a.osm.pbf"
    download(f"{mirror_url}/{PBF}", dest, size=f.size, sha256=f.sha256)
    assert sha256_file(dest) == f.sha256
    assert not dest.with_name(dest.name + ".part").exists()


def test_fetch_region_from_http_mirror(tmp_path, mirror_url):
    settings = Settings(home=tmp_path, data_mirror=mirror_url)
    files = fetch_region("andorra", settings)
    assert files["osm"][0] == tmp_path / "cache" / PBF
    assert len(files["dem"]) == 2
    assert sha256_file(files["osm"][0]) == _andorra_osm().sha256


def test_fetch_region_from_folder_mirror_and_cache_reuse(tmp_path):
    settings = Settings(home=tmp_path, data_mirror=str(SHARED_DATA))
    first = fetch_file(_andorra_osm(), settings)
    mtime = first.stat().st_mtime_ns
    again = fetch_file(_andorra_osm(), settings)
    assert again == first and again.stat().st_mtime_ns == mtime


def test_404_is_a_clear_error_and_leaves_nothing(tmp_path, mirror_url):
    dest = tmp_path / "missing.pbf"
    with pytest.raises(FetchError, match="HTTP 404"):
        download(f"{mirror_url}/andorra/no-such-file.pbf", dest, size=10, sha256="0" * 64)
    assert not dest.exists()
    assert not any(tmp_path.iterdir())


def test_truncated_response_is_an_error_then_resumes(tmp_path, mirror_url):
    f = _andorra_osm()
    dest = tmp_path / "a.osm.pbf"
    with pytest.raises(FetchError, match="truncated"):
        download(f"{mirror_url}/truncated/{PBF}", dest, size=f.size, sha256=f.sha256)
    assert not dest.exists(), "a partial file must never sit under the final name"
    part = dest.with_name(dest.name + ".part")
    assert 0 < part.stat().st_size < f.size
    MirrorHandler.ranges_seen.clear()
    # The same URL now answers the Range request in full: the download resumes, not restarts.
    download(f"{mirror_url}/truncated/{PBF}", dest, size=f.size, sha256=f.sha256)
    assert MirrorHandler.ranges_seen and MirrorHandler.ranges_seen[0].startswith("bytes=")
    assert sha256_file(dest) == f.sha256
    assert not part.exists()


def test_checksum_mismatch_is_an_error_and_leaves_nothing(tmp_path, mirror_url):
    f = _andorra_osm()
    dest = tmp_path / "a.osm.pbf"
    with pytest.raises(FetchError, match="checksum mismatch"):
        download(f"{mirror_url}/corrupt/{PBF}", dest, size=f.size, sha256=f.sha256)
    assert not dest.exists()
    assert not dest.with_name(dest.name + ".part").exists()


def test_size_mismatch_from_a_folder_mirror(tmp_path):
    dest = tmp_path / "x.pbf"
    with pytest.raises(FetchError, match="truncated"):
        download(str(SHARED_DATA / PBF), dest, size=_andorra_osm().size + 100, sha256=None)
    assert not dest.exists()


def test_unreachable_host_is_a_clear_error(tmp_path):
    with pytest.raises(FetchError, match="failed"):
        download("http://127.0.0.1:9/x.pbf", tmp_path / "x.pbf", size=1, timeout=2)
    assert not (tmp_path / "x.pbf").exists()


def test_cli_fetch_reports_errors_without_traceback(tmp_path, mirror_url, monkeypatch, capsys):
    from geoengine.cli import main

    monkeypatch.setenv("GEOENGINE_HOME", str(tmp_path))
    monkeypatch.setenv("GEOENGINE_DATA_MIRROR", mirror_url + "/corrupt")
    assert main(["fetch", "andorra", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: checksum mismatch") and "Traceback" not in err
    assert main(["fetch", "atlantis"]) == 1
    assert "unknown region 'atlantis'" in capsys.readouterr().err
