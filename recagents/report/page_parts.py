"""What a published page adds to a notebook: MathML, folded setup and records, alt text, nav.

The pages in ``docs/`` are read offline, as a book. So the LaTeX of the markdown becomes
MathML (browsers draw it with no script), the setup cells at the top and the ``record(...)``
dump at the end are folded into a closed ``<details>``, every figure gets an alt text derived
from where it stands (its output metadata if the notebook set one, else the heading above it
and the figure file its cell saves), and each page links the previous page, the index and the
next page. :func:`annotate` writes the folds and alt texts into a copy's metadata, which the
exporter (:mod:`recagents.report.page_exporter`) reads; nothing here imports nbconvert.
"""

from __future__ import annotations

import ast
import html
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nbformat import NotebookNode

#: The cell and output metadata key under which :func:`annotate` leaves its marks.
PAGE_KEY = "recagents_page"

#: The image types a notebook's outputs carry (what gets an alt text).
IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml")

_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SETUP = re.compile(r"^(\d+\s*)?(·\s*)?setup\b", re.IGNORECASE)
_SAVEFIG = re.compile(r"savefig\(\s*[\w.]+\s*,\s*(f?)(['\"])(.+?)\2")
_FIELD = re.compile(r"\{[^{}]*\}")


# --------------------------------------------------------------------------------------------
# Math
# --------------------------------------------------------------------------------------------

_ENVIRONMENT = re.compile(r"\\(begin|end)\{aligned\}")
_XMLNS = re.compile(r'\s+xmlns="[^"]*"')
_COLUMN_ALIGN = re.compile(r'<mtd columnalign="(left|right|center)"')
_STYLED = re.compile(
    r'<(mi|mn) mathvariant="(script|double-struck|bold|fraktur)">([A-Za-z0-9])</\1>'
)

#: The Unicode name of each styled alphabet, and of its older letterlike-block exceptions
#: (the script B is "SCRIPT CAPITAL B", U+212C, not in the mathematical block).
_ALPHABETS = {
    "script": ("MATHEMATICAL SCRIPT", "SCRIPT"),
    "double-struck": ("MATHEMATICAL DOUBLE-STRUCK", "DOUBLE-STRUCK"),
    "bold": ("MATHEMATICAL BOLD", "BOLD"),
    "fraktur": ("MATHEMATICAL FRAKTUR", "BLACK-LETTER"),
}
_DIGITS = ("ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE")


def _styled_character(variant: str, character: str) -> str | None:
    """The Unicode mathematical character of ``character`` in ``variant`` (None if none)."""
    import unicodedata

    if character.isdigit():
        kind = f"DIGIT {_DIGITS[int(character)]}"
    else:
        kind = f"{'CAPITAL' if character.isupper() else 'SMALL'} {character.upper()}"
    for prefix in _ALPHABETS[variant]:
        try:
            return unicodedata.lookup(f"{prefix} {kind}")
        except KeyError:
            continue
    return None


def _unicode_variant(match: re.Match[str]) -> str:
    """A styled one-character token as its Unicode character (MathML Core draws no variant)."""
    tag, variant, character = match.groups()
    styled = _styled_character(variant, character)
    return f"<{tag}>{styled}</{tag}>" if styled else match.group(0)


def latex_to_mathml(latex: str, display: bool) -> str:
    r"""The MathML of one LaTeX formula (``display``: a block of its own, else in a line).

    ``aligned`` is written as ``align*`` (the same rows and columns; the converter knows
    only the latter), the namespace attribute is left out (HTML puts ``<math>`` in it) and
    each cell's column alignment is repeated as a style, which browsers that follow MathML
    Core (Chromium) read where they ignore ``columnalign``; a one-letter ``\mathcal``,
    ``\mathbb``, ``\mathbf`` or ``\mathfrak`` becomes its Unicode mathematical character
    (𝒰, 𝟙), since MathML Core ignores a ``mathvariant`` other than "normal". A formula the
    converter cannot read is shown as its LaTeX in a ``<code>``, so no formula breaks a page.
    """
    from latex2mathml.converter import convert

    source = _ENVIRONMENT.sub(lambda m: f"\\{m.group(1)}{{align*}}", latex.strip())
    try:
        mathml = convert(source, display="block" if display else "inline")
    except Exception:  # the converter raises many types; the raw formula is still readable
        return f'<code class="tex">{html.escape(latex.strip())}</code>'
    mathml = _XMLNS.sub("", mathml, count=1)
    mathml = _STYLED.sub(_unicode_variant, mathml)
    return _COLUMN_ALIGN.sub(r'<mtd columnalign="\1" style="text-align: \1"', mathml)


# --------------------------------------------------------------------------------------------
# Folds: the setup cells and the record dump
# --------------------------------------------------------------------------------------------


def _is_record_call(node: ast.AST) -> bool:
    """Whether ``node`` is a call of ``record`` or a ``record_*`` helper (e.g. record_run)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    return name == "record" or name.startswith("record_")


#: Statements that show nothing: a record cell may compute what it records with them.
_SILENT = (
    ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Import, ast.ImportFrom, ast.Pass,
    ast.Continue, ast.Break,
)  # fmt: skip


def _record_calls(statements: Iterable[ast.stmt]) -> int | None:
    """How many record calls ``statements`` make; None if any of them may show something.

    Allowed: record calls, silent statements (assignments, imports) and loops or branches
    made of them; an expression that is not a record call (``display``, ``print``, a bare
    value) shows something, so a cell with one is a cell the reader reads.
    """
    count = 0
    for statement in statements:
        if isinstance(statement, ast.Expr):
            if not _is_record_call(statement.value):
                return None
            count += 1
        elif isinstance(statement, ast.For | ast.While | ast.If | ast.With):
            inner = _record_calls([*statement.body, *getattr(statement, "orelse", [])])
            if inner is None:
                return None
            count += inner
        elif not isinstance(statement, _SILENT):
            return None
    return count


def is_record_only(source: str) -> bool:
    """Whether a code cell only records: the ``record(...)`` dump a notebook ends with.

    Its statements are record calls (``record``, ``record_run``...), possibly in loops and
    branches and with assignments that compute what they record; a cell with anything that
    shows output of its own (a ``display``, a print, a bare value) is not one.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a magic or a shell line: not a plain record cell
        return False
    return bool(_record_calls(tree.body))


def headings(source: str) -> list[str]:
    """The Markdown headings of a cell's text, in order (not those inside fenced code)."""
    found: list[str] = []
    fenced = False
    for line in source.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            found.append(match.group(1).strip())
    return found


def plain_heading(heading: str) -> str:
    """A heading as plain text: no emphasis, code or math marks, no link targets."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[*`$]|\\(?=[a-zA-Z])", "", text)
    return re.sub(r"\s+", " ", text).strip()


def _setup_summary(cell: Any) -> str:
    """The summary line of a folded setup cell: what kind of setup it is."""
    tags = cell.get("metadata", {}).get("tags", [])
    source = str(cell.get("source", ""))
    lines = len(source.strip().splitlines())
    try:
        body = ast.parse(source).body
    except SyntaxError:
        body = []
    targets: list[ast.expr] = []
    for statement in body:
        if isinstance(statement, ast.Assign):
            targets += statement.targets
        elif isinstance(statement, ast.AnnAssign):
            targets.append(statement.target)
    names = [target.id for target in targets if isinstance(target, ast.Name)]
    listed = ", ".join(dict.fromkeys(names))
    if "injected-parameters" in tags:
        return f"Parameters papermill set for this run: {listed}" if listed else "Parameters"
    if "parameters" in tags:
        return f"Parameters you can change: {listed}" if listed else "Parameters"
    if body and all(isinstance(s, ast.Import | ast.ImportFrom) for s in body):
        return f"Setup: imports ({lines} lines)"
    return f"Setup code ({lines} lines)"


def _output_lines(cell: Any) -> int:
    """How many lines of text a cell's outputs show (streams and plain-text results)."""
    count = 0
    for output in cell.get("outputs", []):
        text = output.get("text") or output.get("data", {}).get("text/plain", "")
        count += len(str(text).splitlines())
    return count


# --------------------------------------------------------------------------------------------
# Alt text
# --------------------------------------------------------------------------------------------


def saved_figures(
    source: str, figure_names: Iterable[str] = (), claimed: Iterable[str] = ()
) -> list[str]:
    """The file names a cell saves with ``savefig(fig, "NAME")``, in the order it saves them.

    An f-string name (``f"01_x_{dataset.name}"``) is matched against ``figure_names`` (the
    stems in the figures folder) less those ``claimed`` by a plain-string ``savefig``
    elsewhere in the notebook: one match gives its name; none or several give the name with
    each ``{...}`` written as ``…``, which says no more than the code does.
    """
    stems = sorted(set(figure_names) - set(claimed))
    found: list[str] = []
    for is_f_string, _, name in _SAVEFIG.findall(source):
        if is_f_string and _FIELD.search(name):
            pieces = _FIELD.split(name)
            pattern = re.compile(".+".join(re.escape(piece) for piece in pieces) + r"\Z")
            matches = [stem for stem in stems if pattern.match(stem)]
            name = matches[0] if len(matches) == 1 else _FIELD.sub("…", name)
        found.append(f"{name}.png")
    return found


def _given_alt(output: Any) -> str:
    """The alt text a notebook set on an output's metadata (``alt``, or per image type)."""
    metadata = output.get("metadata", {}) or {}
    if isinstance(metadata.get("alt"), str) and metadata["alt"].strip():
        return str(metadata["alt"]).strip()
    for kind in IMAGE_TYPES:
        per_type = metadata.get(kind)
        given = per_type.get("alt") if isinstance(per_type, dict) else ""
        if isinstance(given, str) and given.strip():
            return given.strip()
    return ""


def figure_alt(heading: str, figure: str, position: int, count: int) -> str:
    """The alt text of a figure: the section it illustrates and the file it was saved as.

    Args:
        heading: The nearest Markdown heading above the figure ("" when none).
        figure: The figure's file name ("" when its cell saves none).
        position: The image's place among its cell's images (1-based).
        count: How many images its cell shows.
    """
    what = f"Figure {figure}" if figure else "Figure"
    if count > 1 and not figure:
        what += f" {position} of {count}"
    return f"{what}, for the section “{heading}”" if heading else what


# --------------------------------------------------------------------------------------------
# The annotated copy
# --------------------------------------------------------------------------------------------


#: Tags of the worked answers to the exercises: folded whole, code and output, until revealed.
ANSWER_TAGS = frozenset({"answer", "exercise-answer", "hide-input"})


def annotate(nb: NotebookNode, figure_names: Iterable[str] = ()) -> NotebookNode:
    """Mark (in place) the cells to fold and give every image output an alt text.

    Folds: the code cells of the setup section (from a heading "Setup", e.g. ``## 0 Setup``,
    to the next heading) and the cells tagged ``parameters``/``injected-parameters`` show
    their code folded and their output (the profile line) open; a cell that only records
    (:func:`is_record_only`) is folded whole, its dump included, and so is a worked answer
    (a cell tagged with one of :data:`ANSWER_TAGS`) under its first comment line. Alt text:
    the output's own (metadata ``alt``) if given, else :func:`figure_alt` of the nearest
    heading above and the figure its cell saves (:func:`saved_figures`). Marks go to
    ``metadata["recagents_page"]``.
    """
    names = list(figure_names)
    claimed = [
        name
        for cell in nb.cells
        if cell.cell_type == "code"
        for is_f_string, _, name in _SAVEFIG.findall(str(cell.source))
        if not (is_f_string and _FIELD.search(name))
    ]
    heading = ""
    in_setup = False
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found = headings(str(cell.source))
            if found:
                heading = plain_heading(found[-1])
                in_setup = bool(_SETUP.match(heading))
            continue
        if cell.cell_type != "code":
            continue
        source = str(cell.source)
        tags = cell.metadata.get("tags", [])
        if in_setup or {"parameters", "injected-parameters"} & set(tags):
            cell.metadata[PAGE_KEY] = {"fold": "input", "summary": _setup_summary(cell)}
        elif ANSWER_TAGS & set(tags):
            first = source.strip().splitlines()[0] if source.strip() else ""
            title = first.lstrip("# ").strip() if first.startswith("#") else "Answer"
            cell.metadata[PAGE_KEY] = {"fold": "cell", "summary": f"{title} (reveal)"}
        elif is_record_only(source):
            lines = _output_lines(cell)
            summary = "The values this run records (record calls"
            summary += f" and their {lines}-line dump)" if lines else ")"
            cell.metadata[PAGE_KEY] = {"fold": "cell", "summary": summary}
        images = [o for o in cell.get("outputs", []) if set(IMAGE_TYPES) & set(o.get("data", {}))]
        saved = saved_figures(source, names, claimed)
        for position, output in enumerate(images, start=1):
            figure = saved[position - 1] if len(saved) == len(images) else ""
            alt = _given_alt(output) or figure_alt(heading, figure, position, len(images))
            output.setdefault("metadata", {})[PAGE_KEY] = {"alt": alt}
    return nb


def nav_html(previous: tuple[str, str] | None, following: tuple[str, str] | None) -> str:
    """The navigation bar of a page: previous page, index, next page (``(href, title)``)."""
    parts = ['<nav class="recagents-nav" aria-label="Notebooks">']
    if previous:
        href, title = (html.escape(value, quote=True) for value in previous)
        parts.append(f'<a rel="prev" href="{href}" title="{title}">← {title}</a>')
    parts.append('<a href="index.html">Index of the notebooks</a>')
    if following:
        href, title = (html.escape(value, quote=True) for value in following)
        parts.append(f'<a rel="next" href="{href}" title="{title}">{title} →</a>')
    parts.append("</nav>")
    return "\n".join(parts)


def neighbours(
    pages: Sequence[tuple[str, str]],
) -> list[tuple[tuple[str, str] | None, tuple[str, str] | None]]:
    """For each page ``(href, title)`` in reading order: the one before and the one after."""
    return [
        (pages[i - 1] if i > 0 else None, pages[i + 1] if i + 1 < len(pages) else None)
        for i in range(len(pages))
    ]
