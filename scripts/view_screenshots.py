"""Take the screenshots of ``evoduet view`` that README.md and docs/view.md show.

Usage (from the checkout, with the dev extra and Debian's ``chromium`` / ``chromium-driver``):

    .venv/bin/python scripts/view_screenshots.py [OUT_DIR]   # default docs/images

Makes a run of the smoke task with the scripted model of the tests (12 iterations, 2
candidates each, the LLM gate retrieving, looking up and going on alone in turn: see
``tests/view_harness.py``; the scripted model is priced at $1 / $2 per million input / output
tokens through ``budget.prices``, so the cost chart has bars), serves it with ``evoduet view``
and saves ``view_tree.png``
(a program selected: its diff), ``view_knowledge.png`` (the latest retrieve opened) and
``view_curves.png`` from headless Chromium.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from tests.view_harness import ViewProcess, scripted_server, start_run  # noqa: E402


def _wait(driver: webdriver.Chrome, script: str, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while not driver.execute_script(script):
        if time.time() > deadline:
            raise TimeoutError(script)
        time.sleep(0.1)


def main() -> None:
    """Run, serve, and save the three screenshots."""
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "images"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        rdir = Path(tmp) / "smoke_polygon_area-demo"
        with scripted_server() as server:
            config = Path(tmp) / "priced.yaml"
            config.write_text("budget:\n  prices:\n    scripted: [1.0, 2.0]\n")
            proc = start_run(server, rdir, 12, "--candidates", "2", "--config", str(config))
            _, err = proc.communicate(timeout=600)
            if proc.returncode != 0:
                raise SystemExit(err[-2000:])
        options = Options()
        options.binary_location = "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,820"):
            options.add_argument(arg)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        try:
            with ViewProcess(rdir) as view:
                driver.get(view.url)
                _wait(driver, "return window.__firstTreeRender")
                best = view.get("api/runs/0/programs")["best_lineage"][-1]
                node = driver.find_element(By.CSS_SELECTOR, f'#tree circle[data-id="{best}"]')
                driver.execute_script(
                    "arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", node
                )
                _wait(driver, "return document.getElementById('diff') !== null")
                driver.save_screenshot(str(out / "view_tree.png"))
                driver.find_element(By.CSS_SELECTOR, "[data-tab=knowledge]").click()
                _wait(driver, "return document.querySelector('#timeline details.iter') !== null")
                driver.execute_script(  # the latest retrieve: its repeated URLs are marked
                    "const d = [...document.querySelectorAll('#timeline details.iter')]"
                    ".find(e => e.querySelector('summary .badge.retrieve')); d.open = true;"
                )
                driver.save_screenshot(str(out / "view_knowledge.png"))
                driver.find_element(By.CSS_SELECTOR, "[data-tab=curves]").click()
                _wait(driver, "return document.querySelector('#curves path.series') !== null")
                driver.save_screenshot(str(out / "view_curves.png"))
        finally:
            driver.quit()
    for name in ("view_tree.png", "view_knowledge.png", "view_curves.png"):
        print(out / name)


if __name__ == "__main__":
    main()
