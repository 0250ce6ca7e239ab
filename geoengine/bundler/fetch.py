"""Region sources: `data/regions.toml` and a verified, resumable downloader.

Sources come from a mirror (`GEOENGINE_DATA_MIRROR`: a folder or an http(s) base URL laid out like
../shared/data) when set, else from each file's public URL. A download streams into `NAME.part`,
resumes it with an HTTP Range request, verifies size and sha256, and only then renames it to its final
name, so a final name never holds a partial or unverified file.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tomllib
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from geoengine.config import Settings, data_path
from geoengine.errors import FetchError, NotFound
from geoengine.progress import NullProgress, Progress

CHUNK = 1 << 16


@dataclass(frozen=True)
class SourceFile:
    role: str
    path: str
    url: str
    size: int | None = None
    sha256: str | None = None
    url_identical: bool = False


@dataclass(frozen=True)
class Region:
    name: str
    title: str
    files: tuple[SourceFile, ...]
    center: tuple[float, float, float] | None = None

    def files_for(self, role: str) -> list[SourceFile]:
        return [f for f in self.files if f.role == role]


@dataclass
class RegionCatalog:
    default: str
    regions: dict[str, Region] = field(default_factory=dict)

    def get(self, name: str) -> Region:
        try:
            return self.regions[name.lower()]
        except KeyError:
            known = ", ".join(sorted(self.regions))
            raise NotFound(f"unknown region '{name}'; known regions: {known}") from None


def regions_file() -> Path:
    return data_path("regions.toml")


def load_regions(path: Path | None = None) -> RegionCatalog:
    path = path or regions_file()
    doc = tomllib.loads(Path(path).read_text())
    catalog = RegionCatalog(default=doc.get("default", "andorra"))
    for name, spec in doc.get("regions", {}).items():
        files = tuple(
            SourceFile(
                role=f["role"],
                path=f["path"],
                url=f["url"],
                size=f.get("size"),
                sha256=f.get("sha256"),
                url_identical=bool(f.get("url_identical", False)),
            )
            for f in spec.get("files", [])
        )
        center = tuple(spec["center"]) if "center" in spec else None
        catalog.regions[name] = Region(name=name, title=spec.get("title", name), files=files, center=center)
    return catalog


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verify(tmp: Path, size: int | None, sha256: str | None, origin: str) -> None:
    got = tmp.stat().st_size
    if size is not None and got != size:
        if got < size:
            raise FetchError(f"download of {origin} is truncated: {got} of {size} bytes arrived; run fetch again to resume")
        tmp.unlink(missing_ok=True)
        raise FetchError(f"download of {origin} has {got} bytes, expected {size}; the partial file was removed")
    if sha256:
        digest = sha256_file(tmp)
        if digest != sha256:
            tmp.unlink(missing_ok=True)
            raise FetchError(
                f"checksum mismatch for {origin}: sha256 {digest}, expected {sha256}; the download was removed"
            )


def download(
    source: str,
    dest: Path,
    *,
    size: int | None = None,
    sha256: str | None = None,
    progress: Progress | None = None,
    timeout: float = 60.0,
) -> Path:
    """Fetch `source` (an http(s) URL, a file:// URL or a local path) to `dest`, verified.

    Streams into `dest.part`; resumes an existing `.part` with a Range request; renames to `dest`
    only after the size and sha256 check. Raises FetchError with a clear message on any failure.
    """
    progress = progress or NullProgress()
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    parsed = urllib.parse.urlparse(source)
    task = progress.task(f"fetch {dest.name}", total=size)
    if parsed.scheme in ("http", "https"):
        _download_http(source, tmp, size=size, progress=task, timeout=timeout)
    else:
        src = Path(urllib.parse.unquote(parsed.path)) if parsed.scheme == "file" else Path(source)
        if not src.exists():
            raise FetchError(f"source file {src} does not exist")
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            shutil.copyfileobj(fin, fout, CHUNK)
    _verify(tmp, size, sha256, source)
    os.replace(tmp, dest)
    task.done(f"{dest.stat().st_size:,} bytes")
    return dest


def _download_http(url: str, tmp: Path, *, size: int | None, progress: Progress, timeout: float) -> None:
    have = tmp.stat().st_size if tmp.exists() else 0
    if size is not None and have > size:
        tmp.unlink()
        have = 0
    if size is not None and have == size:
        return  # complete already; verification decides
    headers = {"User-Agent": "geoengine-fetch"}
    if have:
        headers["Range"] = f"bytes={have}-"
    req = urllib.request.Request(url, headers=headers)
    try:
        resp = urllib.request.urlopen(req, timeout=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:
            return  # the part already holds everything the server has
        raise FetchError(f"download of {url} failed: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise FetchError(f"download of {url} failed: {reason}") from None
    with resp:
        status = getattr(resp, "status", 200)
        mode = "ab" if (have and status == 206) else "wb"
        done = have if mode == "ab" else 0
        try:
            with open(tmp, mode) as fh:
                while True:
                    chunk = resp.read(CHUNK)
                    if not chunk:
                        break
                    fh.write(chunk)
                    done += len(chunk)
                    progress.update(done)
        except http.client.IncompleteRead as exc:
            with open(tmp, "ab") as fh:
                fh.write(exc.partial)
            got = tmp.stat().st_size
            expect = f" of {size}" if size else ""
            raise FetchError(
                f"download of {url} is truncated: {got}{expect} bytes arrived before the connection closed; "
                "run fetch again to resume"
            ) from None
        except (OSError, TimeoutError) as exc:
            raise FetchError(f"download of {url} was interrupted: {exc}; run fetch again to resume") from None


def source_location(file: SourceFile, mirror: str | None) -> tuple[str, bool]:
    """Where to get `file` from, and whether size/sha256 apply to that copy."""
    if mirror:
        if mirror.startswith(("http://", "https://")):
            return mirror.rstrip("/") + "/" + urllib.parse.quote(file.path), True
        return str(Path(mirror).expanduser() / file.path), True
    return file.url, file.url_identical


def fetch_file(file: SourceFile, settings: Settings, progress: Progress | None = None) -> Path:
    """Return the cached, verified copy of `file`, fetching it when needed."""
    dest = Path(settings.cache_dir) / file.path
    origin, verified = source_location(file, settings.data_mirror)
    size = file.size if verified else None
    sha = file.sha256 if verified else None
    if not verified:
        # A public edition differs from the recorded one: keep its own name so caches never mix.
        dest = dest.with_name("public-" + Path(urllib.parse.urlparse(file.url).path).name)
    if dest.exists():
        if (size is None or dest.stat().st_size == size) and (sha is None or sha256_file(dest) == sha):
            return dest
        dest.unlink()
    return download(origin, dest, size=size, sha256=sha, progress=progress)


def fetch_region(name: str, settings: Settings, progress: Progress | None = None) -> dict[str, list[Path]]:
    """Fetch every source file of region `name`; return role -> list of local paths."""
    region = load_regions().get(name)
    out: dict[str, list[Path]] = {}
    for file in region.files:
        out.setdefault(file.role, []).append(fetch_file(file, settings, progress))
    return out
