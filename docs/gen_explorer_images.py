"""The explorer screenshots of docs/explorer.md, from the shipped SRAVEN and fuzzy-logic models: each page opened in
headless Chromium (Selenium + chromium-driver), one point hovered and clicked, its neighbours selected, and the
window saved as a small palette PNG under docs/images/.

    PYTHONPATH=. python docs/gen_explorer_images.py [IMAGE_NAME ...]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

import latentcode as lc

IMAGES = Path(__file__).parent / "images"
SHOTS = {  # image name -> (shipped model, label, row to click, window height)
    "explorer_sraven.png": ("sraven-hyla", "rule", 0, 1000),
    "explorer_fuzzy_logic.png": ("fuzzy_logic-softmax", "terms", 0, 1240),
}


def screenshot(explorer: lc.Explorer, row: int, height: int, out: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size=1280,{height}",
                "--hide-scrollbars"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    with tempfile.TemporaryDirectory() as folder:
        page = explorer.save(Path(folder) / "explorer.html")
        try:
            driver.get(page.resolve().as_uri())
            while driver.execute_script("return document.getElementById('lc-root').dataset.ready") == "0":
                time.sleep(0.05)
            near = np.argsort(np.linalg.norm(explorer.xy - explorer.xy[row], axis=1))[:60]
            driver.execute_script(f"lcExplorer.click({row}); lcExplorer.select({near.tolist()});")
            driver.save_screenshot(str(out))
        finally:
            driver.quit()
    image = Image.open(out).convert("RGB")
    image = image.resize((image.width * 3 // 4, image.height * 3 // 4), Image.LANCZOS)
    image.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)


def main() -> None:
    chosen = sys.argv[1:] or list(SHOTS)  # image names to make again (default: every one)
    for name in chosen:
        model, label, row, height = SHOTS[name]
        explorer = lc.explore(model, label=label, n_samples=256, splits=("train", "ood"), method="umap")
        screenshot(explorer, row, height, IMAGES / name)
        print(f"{IMAGES / name}: {(IMAGES / name).stat().st_size / 1e3:.0f} kB")  # noqa: T201


if __name__ == "__main__":
    main()
