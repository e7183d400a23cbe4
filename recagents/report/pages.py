"""The HTML pages of the executed notebooks and an index page with every figure.

:func:`render_html` renders each executed notebook with nbconvert (imported only when it
runs) and writes ``index.html``: the notebooks, titled by their first heading, and every
figure as a linked thumbnail grouped by notebook. ``make reproduce`` publishes them in the
repository (``docs/``), so a reader on GitHub sees every output without running anything.

The pages are stable: progress bars and execution metadata are left out, and a page whose
content differs from the one on disk only in timings is not rewritten, so an unchanged rerun
leaves ``docs/`` unchanged. Each page carries a hash of what it shows; a notebook whose hash
matches its page's is not rendered again (nbconvert is most of a warm report's time).
"""

from __future__ import annotations

import hashlib
import html
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from recagents.report.evaluate import first_heading
from recagents.report.loading import load_notebooks
from recagents.report.page_parts import annotate, nav_html, neighbours

if TYPE_CHECKING:
    from nbformat import NotebookNode

FIGURE_SUFFIXES = (".png", ".svg", ".jpg", ".jpeg", ".gif")

_INDEX_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; }
h1 { margin-bottom: .2em; } .muted { color: #666; }
ul.notebooks li { margin: .3em 0; } .notrun { color: #a33; }
.figures { display: flex; flex-wrap: wrap; gap: 1em; }
.figures figure { margin: 0; width: 260px; }
.figures img { width: 260px; border: 1px solid #ddd; }
.figures figcaption { font-size: .85em; word-break: break-all; }
"""


#: What varies between two runs of an unchanged notebook: timings and progress counters.
_VOLATILE = (
    re.compile(r"\d+(\.\d+)?\s?(s|ms|min)\b"),
    re.compile(r"\[\d+:\d+(:\d+)?<[^\]]*\]"),
    re.compile(r"\d+(\.\d+)?\s?(it|cell)s?/s"),
)
_PROGRESS = re.compile(r"\d+%\|")


def publishable(nb: NotebookNode) -> NotebookNode:
    r"""A copy of an executed notebook fit to publish: no progress bars, no run metadata.

    Progress bars (stderr lines drawn with ``\r`` or ``NN%|``) and papermill's and Jupyter's
    execution metadata (times, durations, kernel state) are dropped, consecutive pieces of
    one stream are merged, and papermill's injected cell gets a fixed id; every other output
    is kept as it is.
    """
    import copy

    clean = copy.deepcopy(nb)
    clean.metadata.pop("papermill", None)
    for cell in clean.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell.id = "injected-parameters"  # papermill draws a new random id every run
        if cell.cell_type == "code":
            cell.outputs = _stable_streams(cell.outputs)
    return clean


def _stable_streams(outputs: list) -> list:
    """Outputs without progress-bar lines, with consecutive streams of one name merged.

    How a kernel splits a stream into messages depends on timing, so two runs that print the
    same text can store it in different pieces; merged, they render the same.
    """
    kept: list = []
    for out in outputs:
        if out.get("output_type") != "stream":
            kept.append(out)
            continue
        text = out.get("text", "")
        if out.get("name") == "stderr":
            lines = re.split(r"(?<=\n)|\r", text)
            text = "".join(line for line in lines if not _PROGRESS.search(line))
            if not text.strip():
                continue
        if (
            kept
            and kept[-1].get("output_type") == "stream"
            and kept[-1].get("name") == out.get("name")
        ):
            kept[-1]["text"] = kept[-1].get("text", "") + text
        else:
            out["text"] = text  # ``nb`` is already a copy: its nodes may change
            kept.append(out)
    return kept


_STYLE = re.compile(r"<style[^>]*>(.*?)</style>\s*", re.S)


def _shared_styles(page: str) -> tuple[str, str, str]:
    """The page with its ``<head>`` styles moved to one shared sheet; the sheet's name and CSS.

    nbconvert inlines about 260 kB of the same CSS in every page; the pages link one copy,
    named by its content's hash so pages rendered by another nbconvert get their own.
    """
    head, sep, rest = page.partition("</head>")
    if not sep or not _STYLE.search(head):
        return page, "", ""
    css = "\n".join(block.strip() for block in _STYLE.findall(head)) + "\n"
    name = f"nbconvert-{hashlib.sha256(css.encode()).hexdigest()[:12]}.css"
    link = f'<link rel="stylesheet" href="{name}">\n'
    return _STYLE.sub("", head) + link + sep + rest, name, css


def _stable(text: str) -> str:
    for pattern in _VOLATILE:
        text = pattern.sub("~", text)
    return text


_STAMP_NAME = "recagents-source"
_STAMP = re.compile(r'<meta name="recagents-source" content="([0-9a-f]+)">')
_SHEET = re.compile(r'<link rel="stylesheet" href="(nbconvert-[0-9a-f]+\.css)">')


#: The modules that make a page: a change to any of them renders every page again.
_RENDERER_MODULES = ("pages.py", "page_parts.py", "page_exporter.py")


def _stamp(notebook_json: str, title: str) -> str:
    """A hash of what a page shows: the notebook up to timings, its title, and the renderer.

    The renderer is nbconvert's and latex2mathml's versions and the source of the modules
    that make a page (this one and those of ``_RENDERER_MODULES`` beside it), so a change to
    how a page is made renders every page again. ``title`` carries the navigation bar too.
    """
    from importlib.metadata import version

    from nbconvert import __version__ as nbconvert_version

    here = Path(__file__)
    sources = [here.read_bytes()] + [
        (here.parent / name).read_bytes()
        for name in _RENDERER_MODULES
        if name != here.name and (here.parent / name).is_file()
    ]
    renderer = hashlib.sha256(b"\0".join(sources)).hexdigest()
    versions = f"{nbconvert_version} latex2mathml {version('latex2mathml')}"
    text = "\n".join((versions, renderer, title, _stable(notebook_json)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def _rendered_sheet(page: Path, stamp: str, out_dir: Path) -> str | None:
    """The style sheet of ``page`` if it was rendered from content with ``stamp``, else None.

    Rendering is most of a warm ``make reproduce``'s report step, and a rerun of an unchanged
    notebook differs only in timings, which the stamp leaves out: such a page is kept as is.
    """
    try:
        head = page.read_text(encoding="utf-8").partition("</head>")[0]
    except (OSError, UnicodeDecodeError):  # none yet, or not a page of ours: render it anew
        return None
    found, sheet = _STAMP.search(head), _SHEET.search(head)
    if found is None or found.group(1) != stamp or sheet is None:
        return None
    return sheet.group(1) if (out_dir / sheet.group(1)).is_file() else None


def _write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` unless ``path`` already holds it up to timings; whether it wrote."""
    try:
        if _stable(path.read_text(encoding="utf-8")) == _stable(text):
            return False
    except (OSError, UnicodeDecodeError):  # none yet, or unreadable: write it
        pass
    path.write_text(text, encoding="utf-8")
    return True


def render_html(notebooks: Sequence[Path], figures_dir: Path | None, out_dir: Path) -> Path:
    """Render executed notebooks to HTML and write an index page with every figure.

    Each notebook that exists becomes ``out_dir/NAME.html`` (nbconvert's ``HTMLExporter``,
    outputs and embedded images included, through :func:`publishable`), made to be read
    offline as a book (:mod:`recagents.report.page_parts`): math as MathML, no script or
    style from another host, the setup cells and the ``record`` dump folded, an alt text on
    every figure, and links to the previous page, the index and the next page.
    ``out_dir/index.html`` links every notebook (titled by its first heading; missing ones
    listed as "not run") and shows every figure of ``figures_dir`` as a linked thumbnail
    (linked where it lies, not copied), grouped by the notebook number its name starts with.
    A page that differs from the file on disk only in timings is left as it is, and a
    notebook whose content (up to timings) is the one its page was rendered from is not
    rendered again.

    Args:
        notebooks: The executed notebooks expected (e.g. ``build/00_...ipynb`` ...).
        figures_dir: Folder of the figures; ``None`` or a missing folder gives an index that
            says so.
        out_dir: Output folder (created).

    Returns:
        The path of ``index.html``.
    """
    import nbformat

    from recagents.report.page_exporter import offline_exporter

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = _figure_files(figures_dir)
    stems = [Path(name).stem for name in figures]
    exporter = offline_exporter()
    stylesheets: set[str] = set()
    problems: dict[str, str] = {}
    readable: dict[str, tuple[str, NotebookNode]] = {}  # stem -> (title, annotated copy)
    for path in (Path(p) for p in notebooks):
        if not path.is_file():
            continue
        try:
            nb = nbformat.read(path, as_version=4)
            title = first_heading(nb.cells) or path.stem
            readable[path.stem] = (title, annotate(publishable(nb), stems))
        except Exception as error:  # one broken notebook must not hide the others
            problems[path.stem] = f"could not be rendered: {type(error).__name__}: {error}"
    pages = [(f"{stem}.html", title) for stem, (title, _) in readable.items()]
    bars = {href: nav_html(*around) for href, around in zip(pages, neighbours(pages), strict=True)}
    entries: list[tuple[str, str, str]] = []  # (stem, title, html link or "")
    for path in (Path(p) for p in notebooks):
        if path.stem not in readable:
            entries.append((path.stem, "", ""))
            continue
        title, clean = readable[path.stem]
        target = out_dir / f"{path.stem}.html"
        nav = bars[(target.name, title)]
        try:
            stamp = _stamp(nbformat.writes(clean), f"{title}\n{nav}")
            sheet = _rendered_sheet(target, stamp, out_dir)
            if sheet is not None:  # the page on disk shows this content already
                stylesheets.add(sheet)
                entries.append((path.stem, title, target.name))
                continue
            resources = {"metadata": {"name": title}, "recagents_nav": nav}
            body, _ = exporter.from_notebook_node(clean, resources=resources)
        except Exception as error:  # one broken notebook must not hide the others
            entries.append((path.stem, "", ""))
            problems[path.stem] = f"could not be rendered: {type(error).__name__}: {error}"
            continue
        body = body.replace("<head>", f'<head>\n<meta name="{_STAMP_NAME}" content="{stamp}">', 1)
        body, sheet, css = _shared_styles(body)
        if sheet:
            stylesheets.add(sheet)
            _write_if_changed(out_dir / sheet, css)
        _write_if_changed(target, body)
        entries.append((path.stem, title, target.name))

    figures_note = ""
    href = ""
    if figures_dir is not None and Path(figures_dir).is_dir():
        href = Path(os.path.relpath(Path(figures_dir).resolve(), out_dir.resolve())).as_posix()
    else:
        figures_note = f"No figures folder at {figures_dir}." if figures_dir else "No figures."

    for stale in out_dir.glob("nbconvert-*.css"):  # a style sheet no page links any more
        if stale.name not in stylesheets:
            stale.unlink()
    index = out_dir / "index.html"
    _write_if_changed(index, _index_html(entries, problems, figures, figures_note, href))
    return index


def _figure_files(figures_dir: Path | None) -> list[str]:
    """The names of the figures in ``figures_dir``, sorted (none when it is not a folder)."""
    if figures_dir is None or not Path(figures_dir).is_dir():
        return []
    return [
        figure.name
        for figure in sorted(Path(figures_dir).iterdir())
        if figure.is_file() and figure.suffix.lower() in FIGURE_SUFFIXES
    ]


def _figure_html(name: str, folder: str) -> str:
    href = html.escape(f"{folder}/{name}", quote=True)
    return (
        f'<figure><a href="{href}"><img src="{href}" alt="{html.escape(name)}" '
        f'loading="lazy"></a><figcaption>{html.escape(name)}</figcaption></figure>'
    )


def _index_html(
    entries: Sequence[tuple[str, str, str]],
    problems: Mapping[str, str],
    figures: Sequence[str],
    figures_note: str,
    folder: str = "figures",
) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>recagents: executed notebooks and figures</title>",
        f"<style>{_INDEX_STYLE}</style></head><body>",
        "<h1>recagents: executed notebooks and figures</h1>",
        '<p class="muted">Written by <code>make reproduce</code> '
        "(<code>python -m recagents.report html</code>) from the notebooks it executed with "
        "the default profile.</p>",
        "<h2>Notebooks</h2>",
        '<ul class="notebooks">',
    ]
    for stem, title, link in entries:
        if link:
            parts.append(
                f'<li><a href="{html.escape(link, quote=True)}">{html.escape(title)}</a> '
                f'<span class="muted">({html.escape(stem)}.ipynb)</span></li>'
            )
        else:
            why = problems.get(stem, "not run")
            parts.append(f'<li class="notrun">{html.escape(stem)}.ipynb: {html.escape(why)}</li>')
    parts.append("</ul>")
    parts.append("<h2>Figures</h2>")
    parts.append(
        '<p class="muted">The figures as each notebook last wrote them; a notebook not run in '
        "this build keeps the figures of its previous run.</p>"
    )
    if figures_note:
        parts.append(f'<p class="muted">{html.escape(figures_note)}</p>')
    groups: dict[str, list[str]] = {}
    for name in figures:
        prefix = name[:2] if name[:2].isdigit() else ""
        groups.setdefault(prefix, []).append(name)
    notebooks = load_notebooks()
    titles = {
        stem[:2]: title or (notebooks[stem].title if stem in notebooks else stem)
        for stem, title, _ in entries
    }
    for prefix in sorted(groups, key=lambda p: (p == "", p)):
        heading = titles.get(prefix, f"Notebook {prefix}") if prefix else "Other figures"
        parts.append(f"<h3>{html.escape(heading)}</h3>")
        parts.append('<div class="figures">')
        parts += [_figure_html(name, folder) for name in groups[prefix]]
        parts.append("</div>")
    if not figures and not figures_note:
        parts.append('<p class="muted">The figures folder holds no figures.</p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
