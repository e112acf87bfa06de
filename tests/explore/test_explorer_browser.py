"""The explorer as a person uses it, in a real headless Chromium driven by Selenium and Debian's chromium-driver:
hovering a point shows that row's instance picture, clicking it draws its per-head code and its attention pattern,
a box selection reports the selection's purity, and the console stays free of errors.

Needs Debian's `chromium` and `chromium-driver` (`apt-get install -y --no-install-recommends chromium
chromium-driver`) and `selenium` (the dev extras). Without them the test skips, saying so; with
LATENTCODE_REQUIRE_CHROMIUM=1 (CI) a missing browser fails it instead.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import latentcode as lc
from latentcode.model.transformer import build_model
from latentcode.tasks.fuzzy_logic import FuzzyLogic
from latentcode.tasks.sraven import RULE_NAMES, SRaven

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
INSTALL = "apt-get install -y --no-install-recommends chromium chromium-driver; pip install selenium"


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        webdriver = None
    if CHROMIUM is None or DRIVER is None or webdriver is None:
        if os.environ.get("LATENTCODE_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"LATENTCODE_REQUIRE_CHROMIUM=1 but chromium, chromedriver or selenium is missing: {INSTALL}")
        pytest.skip(f"chromium, chromedriver or selenium missing; to drive the explorer in a browser: {INSTALL}")
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


def open_page(driver, path: Path) -> None:
    driver.get(path.resolve().as_uri())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready = driver.execute_script("return document.getElementById('lc-root').dataset.ready")
        if ready != "0":
            break
        time.sleep(0.05)
    assert ready == "1", f"the page never got ready (data-ready={ready!r}); console: {driver.get_log('browser')}"


def pointer_to(driver, row: int):
    """An action chain with the mouse over row `row`'s point."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    canvas = driver.find_element(By.ID, "lc-scatter")
    point = driver.execute_script(f"return lcExplorer.pointClient({row})")
    box = canvas.rect
    dx, dy = point["x"] - box["x"] - box["width"] / 2, point["y"] - box["y"] - box["height"] / 2
    return ActionChains(driver).move_to_element_with_offset(canvas, round(dx), round(dy))


def lonely_row(xy: np.ndarray) -> int:
    """The row whose nearest neighbour is farthest: hovering it cannot land on another point."""
    distance = np.linalg.norm(xy[:, None] - xy[None], axis=-1)
    np.fill_diagonal(distance, np.inf)
    return int(distance.min(axis=1).argmax())


def inked(driver, canvas_id: str) -> int:
    """How many pixels of a canvas differ from white: 0 when nothing was drawn."""
    return driver.execute_script(
        f"const c = document.getElementById('{canvas_id}'); if (!c) return -1;"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;"
        "for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250)) n++;"
        "return n;"
    )


def severe(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@pytest.fixture(scope="module")
def sraven_page(tmp_path_factory):
    task = SRaven()
    run = SimpleNamespace(model=build_model(task, "softmax", "tiny"), task=task)
    explorer = lc.explore(run, label="rule", n_samples=30, splits=("train", "ood"), method="pca")
    path = explorer.save(tmp_path_factory.mktemp("explorer") / "sraven.html")
    return explorer, path


def test_hover_click_and_select_in_chromium(browser, sraven_page):
    explorer, path = sraven_page
    from selenium.webdriver.common.by import By

    open_page(browser, path)
    row = lonely_row(explorer.xy)
    pointer_to(browser, row).perform()
    instance = browser.find_element(By.ID, "lc-instance")
    assert instance.get_attribute("data-row") == str(row)
    svg = instance.find_element(By.CSS_SELECTOR, "svg.lc-instance")
    assert len(svg.find_elements(By.TAG_NAME, "rect")) >= 9 * 4  # nine panels of four features
    rule = RULE_NAMES[int(explorer.codes.labels["rule"][row])]
    assert f"rule: {rule}" in instance.text
    assert instance.text.count("feature ") == 4  # every feature's rule named

    assert inked(browser, "lc-attn") == -1  # nothing drawn before the click
    pointer_to(browser, row).click().perform()
    pattern = browser.find_element(By.ID, "lc-pattern")
    assert pattern.get_attribute("data-row") == str(row)
    query, key = explorer.site(row)
    assert f"query position {query[0]}" in pattern.text and f"key positions {', '.join(map(str, key))}" in pattern.text
    assert inked(browser, "lc-code") > 100 and inked(browser, "lc-attn") > 100

    # a box over the whole plot selects every point; the purity is the most common rule's share
    from selenium.webdriver.common.action_chains import ActionChains

    canvas = browser.find_element(By.ID, "lc-scatter")
    size = canvas.size
    (ActionChains(browser).move_to_element_with_offset(canvas, -size["width"] // 2 + 1, -size["height"] // 2 + 1)
     .click_and_hold().move_by_offset(size["width"] // 2, size["height"] // 2)
     .move_by_offset(size["width"] // 2 - 3, size["height"] // 2 - 3).release().perform())
    selection = browser.find_element(By.ID, "lc-selection")
    n = explorer.codes.n_samples
    assert selection.get_attribute("data-count") == str(n)
    purity = np.bincount(explorer.codes.labels["rule"]).max() / n
    assert selection.find_element(By.CLASS_NAME, "lc-purity").text == f"{100 * purity:.1f}%"
    assert severe(browser) == []


def test_codes_without_model_and_fuzzy_logic_in_chromium(browser, tmp_path):
    from selenium.webdriver.common.by import By

    task = FuzzyLogic(seq_len=8)
    codes = lc.extract_latent_codes(build_model(task, "hyla", "tiny"), task, ("train", "ood"), 20, progress=False)
    explorer = lc.explore(codes, label="target", method="pca")
    path = explorer.save(tmp_path / "fuzzy.html")
    open_page(browser, path)
    row = lonely_row(explorer.xy)
    pointer_to(browser, row).click().perform()
    instance = browser.find_element(By.ID, "lc-instance")
    assert instance.get_attribute("data-row") == str(row)
    assert len(instance.find_elements(By.CSS_SELECTOR, "table tr")) == task.seq_len + 1  # header + examples
    assert f"{float(codes.labels['prediction'][row]):.2f}" in instance.text  # the model's answer at the query
    pattern = browser.find_element(By.ID, "lc-pattern")
    assert inked(browser, "lc-code") > 50
    assert "no attention pattern" in pattern.text  # codes alone: the page says what is missing
    assert severe(browser) == []
