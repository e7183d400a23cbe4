"""`make lab` in a real browser: JupyterLab opens a notebook and runs its first cells (#39).

Headless Chromium (``make setup-browser``) loads the Lab page of (a copy of) notebook 03 from the
server ``make lab`` starts on a free loopback port, waits for the notebook's cells and an idle
kernel, then runs the first cells with Shift+Enter, as a reader does, and reads their prompts
and outputs back from the page: every one must have run ("[n]:"), none may show an error.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import time
import urllib.request

import pytest
from test_lab import NOTEBOOK, ROOT, _first_cells, _free_port

#: Where JupyterLab renders a cell's error (tracebacks come as the stderr mime type).
ERROR_OUTPUT = ".jp-Notebook .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
TRACEBACK = re.compile(r"Traceback|\b\w+Error\b")
CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _wait(check, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {seconds:.0f} s waiting for {what}"
        time.sleep(0.5)


@pytest.mark.skipif(
    not (CHROMEDRIVER and CHROMIUM) and not os.environ.get("CI"),
    reason="no chromium/chromedriver (make setup-browser)",
)
def test_jupyterlab_opens_a_notebook_and_runs_its_first_cells(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    assert CHROMEDRIVER and CHROMIUM, "CI needs chromium and chromedriver: make setup-browser"
    port, token = _free_port(), secrets.token_hex(8)
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}  # fmt: skip
    # A copy of the notebook, so that Lab's autosave can never write into notebooks/.
    folder = tmp_path / "notebooks"
    folder.mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, folder / NOTEBOOK)
    lab_args = f"--no-browser --port {port} --IdentityProvider.token={token}"
    server = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"LAB_ARGS={lab_args}", f"LAB_DIR={folder}"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1400,1000"):  # fmt: skip
        options.add_argument(flag)
    driver = None
    try:

        def up() -> bool:
            assert server.poll() is None, "make lab exited"
            try:
                url = f"http://127.0.0.1:{port}/api/status?token={token}"
                with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310
                    return response.status == 200
            except OSError:
                return False

        _wait(up, 180, "JupyterLab to answer")
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        driver.get(f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?token={token}")
        _wait(lambda: len(driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell")) >= 3,
              120, "the notebook's first cells")  # fmt: skip
        _wait(lambda: driver.find_elements(
            By.CSS_SELECTOR, ".jp-Notebook-ExecutionIndicator[data-status='idle']"
        ) or "Idle" in driver.page_source, 120, "an idle kernel")  # fmt: skip
        n_first = len(_first_cells(ROOT / "notebooks" / NOTEBOOK))
        code = driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell")
        code[0].find_element(By.CSS_SELECTOR, ".jp-InputPrompt").click()
        # Run from the first code cell down to the parameters cell, as a reader would.
        driver.switch_to.active_element.send_keys(Keys.ESCAPE)
        for _ in range(n_first):
            driver.switch_to.active_element.send_keys(Keys.SHIFT, Keys.ENTER)
            time.sleep(0.3)

        def ran() -> list[str] | None:
            prompts = [c.find_element(By.CSS_SELECTOR, ".jp-InputPrompt").text
                       for c in driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell")
                       ][:n_first]  # fmt: skip
            done = all(p.strip().startswith("[") and p.strip()[1:2].isdigit() for p in prompts)
            return prompts if done else None

        _wait(ran, 180, f"the first {n_first} cells to run")
        errors = [e.text for e in driver.find_elements(By.CSS_SELECTOR, ERROR_OUTPUT)
                  if TRACEBACK.search(e.text)]  # fmt: skip
        assert not errors, f"a cell of {NOTEBOOK} failed in JupyterLab: {errors[0][:300]}"
        driver.save_screenshot(str(tmp_path / "lab.png"))
    finally:
        if driver is not None:
            driver.quit()
        os.killpg(server.pid, 15)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait(timeout=30)
