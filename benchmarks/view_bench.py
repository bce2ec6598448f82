"""Timings of ``evoduet view`` on runs of 100 and 1,000 programs (and more with --sizes).

For each size a synthetic finished run is written with the package's own store, event and
prompt writers (`tests.view_harness.synthetic_run`) and served by a real ``evoduet view``
process. Measured:

* each JSON endpoint's first (cold) answer and its answer again (kept until the run's files
  change), in seconds, over loopback;
* the page's first render of the tree in headless Chromium (``performance.now()`` when the
  tree is drawn, from navigation start; median of ``--loads`` fresh loads), when Debian's
  ``chromium`` and ``chromium-driver`` are installed.

Ratios are against the smallest size, measured in the same run. The bar: first render
of a 1,000-program run under 2 s (the browser test asserts it).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/view_bench.py [--sizes 100 1000] [--loads 3]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.view_harness import ViewProcess, synthetic_run

ENDPOINTS = ("api/runs", "api/runs/0/programs", "api/runs/0/timeline", "api/runs/0/curves")


def _timed(view: ViewProcess, path: str) -> float:
    start = time.perf_counter()
    view.get(path)
    return time.perf_counter() - start


def _first_render(url: str, loads: int) -> float | None:
    if not (os.path.isfile("/usr/bin/chromium") and os.path.isfile("/usr/bin/chromedriver")):
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    times = []
    try:
        for _ in range(loads):
            driver.get("about:blank")
            driver.get(url)
            deadline = time.time() + 60
            value = None
            while value is None and time.time() < deadline:
                value = driver.execute_script("return window.__firstTreeRender || null")
                time.sleep(0.02)
            if value is None:
                raise TimeoutError("the tree was not drawn within 60 s")
            times.append(float(value))
    finally:
        driver.quit()
    return statistics.median(times)


def main() -> None:
    """Print one row per size: endpoint timings, first render, ratios to the smallest size."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--loads", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            rdir = synthetic_run(Path(tmp) / f"run{size}", programs=size)
            with ViewProcess(rdir) as view:
                cold = {p: _timed(view, p) for p in ENDPOINTS}
                warm = {p: _timed(view, p) for p in ENDPOINTS}
                render = _first_render(view.url, args.loads)
            rows.append((size, cold, warm, render))
    base = rows[0]
    print(f"{'programs':>8}  {'endpoint':<22} {'cold s':>8} {'cached s':>9} {'cold ×':>7}")
    for size, cold, warm, _ in rows:
        for p in ENDPOINTS:
            ratio = cold[p] / base[1][p] if base[1][p] else float("nan")
            print(f"{size:>8}  {p:<22} {cold[p]:>8.3f} {warm[p]:>9.3f} {ratio:>7.2f}")
    print()
    print(f"{'programs':>8}  {'first render ms (median)':>25} {'×':>6}  limit 2000 ms")
    for size, _, _, render in rows:
        if render is None:
            print(f"{size:>8}  {'(no chromium)':>25}")
            continue
        ratio = render / base[3] if base[3] else float("nan")
        print(f"{size:>8}  {render:>25.0f} {ratio:>6.2f}  {'ok' if render < 2000 else 'OVER'}")


if __name__ == "__main__":
    main()
