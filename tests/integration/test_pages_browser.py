"""The published pages, as a reader's browser shows them with the network off (issue #39).

Every page of ``docs/`` is opened from disk in headless Chromium (Debian's ``chromium`` and
``chromium-driver``; ``make setup-browser`` installs them, CI does) with every host name
unresolvable, so a page that needs the network shows it. On each page: the math is rendered
(MathML elements, no raw ``\\begin{...}`` or ``$$`` left in the text a reader sees), every
image has loaded and has a real description, every link to a local file points to one that
exists, and the browser requested nothing but local files.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.html"))
CHROMEDRIVER = shutil.which("chromedriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

if not (CHROMEDRIVER and CHROMIUM):
    if os.environ.get("CI"):
        pytest.fail("CI needs chromium and chromedriver: run `make setup-browser`", pytrace=False)
    pytest.skip("no chromium/chromedriver (make setup-browser)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_a_page_renders_offline(browser, page):
    browser.get(page.as_uri())
    # Lazy images below the fold load only when scrolled to: load them all, then look.
    browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        const images = [...document.images];
        images.forEach(i => { i.loading = 'eager'; });
        Promise.all(images.map(i => i.decode().catch(() => null))).then(() => done());
        """
    )
    state = browser.execute_script(
        """
        const text = document.body.innerText;
        return {
          requests: performance.getEntriesByType('resource').map(e => e.name),
          images: [...document.images].map(i => ({src: i.currentSrc || i.src,
            ok: i.complete && i.naturalWidth > 0, alt: i.alt || ''})),
          links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
          math: document.getElementsByTagName('math').length,
          rawTex: /\\\\begin\\{|\\$\\$/.test(text),
        };
        """
    )
    remote = [url for url in state["requests"] if not url.startswith("file:")]
    assert not remote, f"{page.name} asked the network for {remote[:5]}"
    broken = [img["src"][-80:] for img in state["images"] if not img["ok"]]
    assert not broken, f"{page.name}: images that did not load: {broken}"
    undescribed = [
        img["src"][-60:]
        for img in state["images"]
        if not img["alt"].strip() or "No description" in img["alt"]
    ]
    assert not undescribed, f"{page.name}: images without a description: {undescribed}"
    assert not state["rawTex"], f"{page.name} shows raw TeX to the reader"
    missing = []
    for href in state["links"]:
        parsed = urlparse(href)
        if parsed.scheme or href.startswith("#") or not parsed.path:
            continue
        if not (page.parent / unquote(parsed.path)).exists():
            missing.append(href)
    assert not missing, f"{page.name} links to files that do not exist: {missing[:5]}"
