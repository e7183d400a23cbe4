"""The published pages read offline, as a book: MathML, no other host, folds, alt text, nav."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

from recagents.report.page_parts import (
    annotate,
    figure_alt,
    is_record_only,
    latex_to_mathml,
    saved_figures,
)
from recagents.report.pages import render_html

# A 1x1 PNG: what an inline matplotlib figure is stored as.
_PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()

_METHOD = r"""## 1 The method

Each user $u \in \mathcal U$ is ranked by
$$
\begin{aligned}
&\text{score}(u) = \frac{1}{n}\sum_i x_{ui} && \text{the mean}\\
&\mathrm{HR@}K = \mathbb{1}[r \le K]
\end{aligned}
$$
and a price of 5 dollars is not math.
"""


def _tiny(
    title: str, *, figure: str = "01_tiny_{name}", given_alt: str = ""
) -> nbformat.NotebookNode:
    """An executed notebook shaped like the paper notebooks: setup, method, figure, records."""
    v4 = nbformat.v4
    imports = v4.new_code_cell("import math\nfrom pathlib import Path", execution_count=1)
    parameters = v4.new_code_cell('PROFILE: str = "default"\nSEED = 0', execution_count=2)
    parameters.metadata["tags"] = ["parameters"]
    profile = v4.new_code_cell('print(f"profile={PROFILE}: 8 users")', execution_count=3)
    profile.outputs = [v4.new_output("stream", name="stdout", text="profile=default: 8 users\n")]
    plot = v4.new_code_cell(
        f'fig = plot(frame)\nplotting.savefig(fig, f"{figure}")\ndisplay(Markdown(summary))',
        execution_count=4,
    )
    image = v4.new_output("display_data", data={"image/png": _PNG, "text/plain": "<Figure>"})
    if given_alt:
        image.metadata["alt"] = given_alt
    said = v4.new_output("display_data", data={"text/markdown": "The mean is $\\bar x = 0.5$."})
    plot.outputs = [image, said]
    shown = v4.new_code_cell('display(table)\nrecord("hr", 0.5)', execution_count=5)
    shown.outputs = [v4.new_output("display_data", data={"text/plain": "TABLE-SHOWN"})]
    dump = v4.new_code_cell(
        'record("profile", PROFILE)\nfor key, value in values.items():\n'
        "    name = f'hr/{key}'\n    record(name, value)",
        execution_count=6,
    )
    dump.outputs = [v4.new_output("stream", name="stdout", text="RECORD-DUMP a\nb\nc\n")]
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_markdown_cell(f"# {title}\n\nIntro."),
        v4.new_markdown_cell("## 0 Setup"),
        imports,
        parameters,
        profile,
        v4.new_markdown_cell(_METHOD),
        v4.new_markdown_cell("## 2 The *ranking* figure"),
        plot,
        shown,
        v4.new_markdown_cell("## References\n\n1. A paper."),
        dump,
    ]
    return nb


def _write(path: Path, nb: nbformat.NotebookNode) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tiny notebooks rendered once (nbconvert is most of the time of these tests)."""
    root = tmp_path_factory.mktemp("site")
    figures = root / "figures"
    figures.mkdir()
    (figures / "01_tiny_plot.png").write_bytes(base64.b64decode(_PNG))
    first = _write(root / "build" / "01_tiny.ipynb", _tiny("01 · Tiny"))
    second = _write(
        root / "build" / "02_other.ipynb",
        _tiny("02 · Other", figure="02_other_{x}", given_alt="Bars of HR@1 per method"),
    )
    render_html([first, second], figures, root / "docs")
    return root / "docs"


def _page(site: Path, name: str) -> BeautifulSoup:
    return BeautifulSoup((site / name).read_text(encoding="utf-8"), "html.parser")


def test_math_of_markdown_cells_and_generated_text_becomes_mathml(site: Path) -> None:
    text = (site / "01_tiny.html").read_text(encoding="utf-8")
    page = BeautifulSoup(text, "html.parser")
    blocks = page.select('math[display="block"]')
    assert len(blocks) == 1 and blocks[0].find("mtable") is not None  # aligned -> a table
    assert len(blocks[0].find_all("mtr")) == 2 and "the\xa0mean" in blocks[0].get_text()
    inline = page.select('math[display="inline"]')
    assert any("𝒰" in m.get_text() for m in inline), "\\mathcal U as its Unicode letter"
    assert "𝟙" in blocks[0].get_text(), "\\mathbb{1} drawn without mathvariant"
    generated = page.select('[data-mime-type="text/markdown"] math')
    assert any("x̄" in m.get_text() or "¯" in m.get_text() for m in generated)
    for raw in ("$$", "\\begin{aligned}", "\\mathcal", "\\frac"):
        assert raw not in text, raw
    assert "MathJax" not in text and "mathjax" not in text


def test_a_page_makes_no_request_to_another_host(site: Path) -> None:
    remote = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
    for name in ("01_tiny.html", "02_other.html", "index.html"):
        page = _page(site, name)
        for tag, attribute in (("script", "src"), ("link", "href"), ("img", "src"),
                               ("iframe", "src"), ("source", "src")):  # fmt: skip
            for element in page.find_all(tag):
                assert not remote.match(element.get(attribute, "")), (name, str(element)[:120])
        for script in page.find_all("script"):
            assert not re.search(r"https?://", script.get_text()), (name, "a script imports")
    (sheet,) = site.glob("nbconvert-*.css")
    css = sheet.read_text(encoding="utf-8")
    assert not re.search(r"url\(\s*['\"]?(https?:)?//|@import", css)


def test_record_dump_and_setup_cells_are_folded(site: Path) -> None:
    page = _page(site, "01_tiny.html")
    folds = page.select("details.recagents-fold")
    assert all(not fold.has_attr("open") for fold in folds), "folds are closed"
    summaries = [fold.summary.get_text() for fold in folds]
    assert summaries[0].startswith("Setup: imports")
    assert summaries[1] == "Parameters you can change: PROFILE, SEED"
    assert summaries[2].startswith("Setup code")
    assert summaries[3].startswith("The values this run records") and "4-line" not in summaries[3]
    assert "3-line dump" in summaries[3]
    assert len(folds) == 4
    # The record dump: its code and its output inside the fold.
    assert "RECORD-DUMP" in folds[3].get_text() and "record" in folds[3].get_text()
    # A setup cell: its code folded, its output (the profile line) open.
    assert "print(" in folds[2].get_text() and "profile=default" not in folds[2].get_text()
    assert "profile=default: 8 users" in page.get_text()
    # A cell that shows something and records is read, not folded.
    assert not any("TABLE-SHOWN" in fold.get_text() for fold in folds)


def test_every_page_links_previous_index_and_next(site: Path) -> None:
    first, second = _page(site, "01_tiny.html"), _page(site, "02_other.html")
    for page in (first, second):
        bars = page.select("nav.recagents-nav")
        assert len(bars) == 2, "one bar at the top, one at the bottom"
        assert all(bar.find("a", href="index.html") for bar in bars)
    top = first.select_one("nav.recagents-nav")
    assert top.find("a", rel="prev") is None
    assert top.find("a", rel="next")["href"] == "02_other.html" and "02 · Other" in top.get_text()
    top = second.select_one("nav.recagents-nav")
    assert top.find("a", rel="prev")["href"] == "01_tiny.html" and top.find("a", rel="next") is None


def test_figures_get_real_alt_text(site: Path) -> None:
    (image,) = _page(site, "01_tiny.html").find_all("img")
    assert image["alt"] == "Figure 01_tiny_plot.png, for the section “2 The ranking figure”"
    (image,) = _page(site, "02_other.html").find_all("img")
    assert image["alt"] == "Bars of HR@1 per method", "the notebook's own alt text wins"
    for name in ("01_tiny.html", "02_other.html"):
        assert "No description has been provided" not in (site / name).read_text("utf-8")


def test_pages_are_byte_identical_across_renders_and_nav_follows_new_pages(site: Path) -> None:
    root = site.parent
    build = root / "build"
    first, second = build / "01_tiny.ipynb", build / "02_other.ipynb"
    render_html([first, second], root / "figures", root / "again")
    for page in sorted(site.iterdir()):
        assert (root / "again" / page.name).read_bytes() == page.read_bytes(), page.name
    third = _write(build / "03_third.ipynb", _tiny("03 · Third"))
    render_html([first, second, third], root / "figures", root / "again")
    nav = _page(root / "again", "02_other.html").select_one("nav.recagents-nav")
    assert nav.find("a", rel="next")["href"] == "03_third.html", "a kept page's nav is redone"


def test_record_only_cells() -> None:
    assert is_record_only('record("a", 1)\nrecord_run(result)')
    assert is_record_only("for k, v in d.items():\n    name = k.upper()\n    record(name, v)")
    assert is_record_only("if x:\n    record('a', 1)\nelse:\n    record('a', 2)")
    assert not is_record_only('record("a", 1)\ndisplay(table)')  # shows a table
    assert not is_record_only('record("a", 1)\nprint("done")')
    assert not is_record_only('record("a", 1)\nvalue')  # a bare value is shown
    assert not is_record_only("x = 1")  # records nothing
    assert not is_record_only("%time record('a', 1)")  # a magic: not plain Python
    assert not is_record_only("")


def test_saved_figure_names_resolve_f_strings_against_the_figures_folder() -> None:
    source = 'savefig(fig, f"02_x_{tag}_causal")\nplotting.savefig(fig, "02_x_plain")'
    names = ["02_x_a_causal", "02_x_b_causal", "02_x_plain"]
    # Two files match the f-string: the name says no more than the code.
    assert saved_figures(source, names) == ["02_x_…_causal.png", "02_x_plain.png"]
    # A name another cell saves as a plain string is not a candidate.
    assert saved_figures(source, names, claimed=["02_x_b_causal"])[0] == "02_x_a_causal.png"
    assert saved_figures("fig.savefig('out.png')") == []


def test_alt_text_falls_back_to_the_heading_and_position() -> None:
    assert figure_alt("3 Results", "", 2, 3) == "Figure 2 of 3, for the section “3 Results”"
    assert figure_alt("", "01_a.png", 1, 1) == "Figure 01_a.png"
    nb = _tiny("01 · Tiny")
    nb.cells[7].source = "plt.show()"  # saves no file
    annotate(nb)
    alt = nb.cells[7].outputs[0].metadata["recagents_page"]["alt"]
    assert alt == "Figure, for the section “2 The ranking figure”"


def test_unreadable_latex_is_shown_as_code_not_lost() -> None:
    assert latex_to_mathml("x^{", display=False) == '<code class="tex">x^{</code>'
    assert latex_to_mathml("a < b", display=False).startswith('<math display="inline">')
    assert "&lt;" in latex_to_mathml("a < b", display=False) or "&#x0003C;" in latex_to_mathml(
        "a < b", display=False
    )


def test_worked_answers_are_folded_under_their_first_comment() -> None:
    from nbformat import v4

    from recagents.report.page_parts import PAGE_KEY, annotate

    nb = v4.new_notebook()
    answer = v4.new_code_cell("# Answer A: a popularity baseline\nprint(1)")
    answer.metadata["tags"] = ["answer", "hide-input"]
    plain = v4.new_code_cell("print(2)")
    nb.cells = [v4.new_markdown_cell("## Try it"), answer, plain]
    annotate(nb)
    assert answer.metadata[PAGE_KEY] == {
        "fold": "cell",
        "summary": "Answer A: a popularity baseline (reveal)",
    }
    assert PAGE_KEY not in plain.metadata
