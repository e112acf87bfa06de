"""The explorer's limits: on N SRAVEN codes of a shipped model, the size of the self-contained HTML page and how long
Chromium takes to open it (navigation start to data decoded and points drawn, `lcExplorer.readyMs`), plus how long
a click takes to draw the code and pattern panels. Needs /usr/bin/chromium, chromedriver and selenium.

    python bench/bench_explorer.py [--model sraven-hyla] [--n-codes 4096] [--method pca] [--loads 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import latentcode as lc


def open_times(path: Path, loads: int) -> tuple[list[float], list[float]]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    ready, click = [], []
    try:
        for _ in range(loads):
            driver.get(path.resolve().as_uri())
            while driver.execute_script("return document.getElementById('lc-root').dataset.ready") == "0":
                time.sleep(0.02)
            ready.append(driver.execute_script("return lcExplorer.readyMs") / 1000)
            click.append(driver.execute_script(
                "const t = performance.now(); lcExplorer.click(0); return performance.now() - t;") / 1000)
    finally:
        driver.quit()
    return ready, click


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="sraven-hyla")
    parser.add_argument("--n-codes", type=int, default=4096)
    parser.add_argument("--method", default="pca", choices=("pca", "umap"))
    parser.add_argument("--loads", type=int, default=3)
    args = parser.parse_args()
    start = time.perf_counter()
    explorer = lc.explore(args.model, n_samples=args.n_codes // 2, splits=("train", "ood"), method=args.method)
    built = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        path = explorer.save(Path(folder) / "explorer.html")
        written = time.perf_counter() - start
        size = path.stat().st_size
        ready, click = open_times(path, args.loads)
    print(f"{args.model}: {explorer.codes.n_samples} codes ({args.method}), layer {explorer.layer}")
    print(f"  explore() {built:.1f} s, page written in {written:.1f} s, HTML {size / 1e6:.2f} MB")
    print(f"  Chromium open to ready: median {statistics.median(ready):.2f} s over {args.loads} loads "
          f"({', '.join(f'{t:.2f}' for t in ready)})")
    print(f"  click to code + pattern drawn: median {1000 * statistics.median(click):.0f} ms")


if __name__ == "__main__":
    main()
