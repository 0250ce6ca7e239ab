"""Helpers of the real-browser tests: Debian's chromium through Playwright, a server on loopback, and a
small PNG reader for pixel checks of screenshots."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.serving import free_port, start_serve, stop  # noqa: F401 (free_port, stop: the browser tests' helpers)

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = Path(os.environ.get("GEOENGINE_SCREENSHOTS", Path(__file__).resolve().parent / "screenshots"))


def chromium_path() -> str | None:
    for c in (shutil.which("chromium"), "/usr/bin/chromium"):
        if c and Path(c).exists():
            return c
    return None


def start_server(bundle: Path, port: int, env: dict, log_path: Path, exit_after: int = 900) -> subprocess.Popen:
    """`geoengine serve` on loopback; it stops by itself after `exit_after` seconds."""
    return start_serve(bundle, port, env, open(log_path, "w"), exit_after=exit_after)


def wait_until_up(proc: subprocess.Popen, url: str, log_path: Path, timeout: float = 420.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited early:\n" + log_path.read_text()[-3000:])
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.5)
    raise RuntimeError(f"the server did not answer {url} within {timeout:.0f} s:\n" + log_path.read_text()[-3000:])


IMAGE_STATS_JS = """async ([b64, box]) => {
  const img = new Image();
  img.src = "data:image/png;base64," + b64;
  await img.decode();
  const c = document.createElement("canvas");
  c.width = img.width; c.height = img.height;
  const ctx = c.getContext("2d");
  ctx.drawImage(img, 0, 0);
  const [x0, y0, x1, y1] = box;
  const d = ctx.getImageData(x0, y0, x1 - x0, y1 - y0).data;
  let n = 0, sum = 0, sum2 = 0;
  const colours = new Set();
  for (let i = 0; i < d.length; i += 4) {
    const l = 0.299 * d[i] + 0.587 * d[i + 1] + 0.114 * d[i + 2];
    n++; sum += l; sum2 += l * l;
    colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
  }
  const mean = sum / n;
  return { variance: sum2 / n - mean * mean, colours: colours.size, mean };
}"""


def image_stats(page, png: bytes, box: tuple[int, int, int, int]) -> dict:
    """Variance of luminance and number of distinct colours in box (x0, y0, x1, y1) of a screenshot,
    computed by the browser itself (a blank page decodes the PNG)."""
    import base64

    return page.evaluate(IMAGE_STATS_JS, [base64.b64encode(png).decode(), list(box)])
