r"""The nbconvert exporter of the published pages: offline math, no other host, folds, alt, nav.

nbconvert's ``lab`` template loads require.js, MathJax and mermaid from a CDN, so a page read
offline shows raw ``$$\begin{aligned}...``. :func:`offline_exporter` is that exporter with
the markdown's LaTeX written as MathML at render time
(:func:`~recagents.report.page_parts.latex_to_mathml`), every script from another host left
out, and a template that reads the marks of :func:`~recagents.report.page_parts.annotate`
(folded cells, alt texts) and the navigation bar passed as ``resources["recagents_nav"]``.
Imported only when pages are rendered (it imports nbconvert).
"""

from __future__ import annotations

from typing import Any

from jinja2 import DictLoader, pass_context
from nbconvert import HTMLExporter
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

from recagents.report.page_parts import PAGE_KEY, latex_to_mathml

TEMPLATE_NAME = "recagents_page.html.j2"

#: Styles of the navigation bar and the folds (moved to the shared sheet with nbconvert's).
_STYLE = """
nav.recagents-nav { display: flex; justify-content: space-between; gap: 1em; flex-wrap: wrap;
  padding: .6em 1em; margin: 0 0 1em; border-bottom: 1px solid #ddd; font-size: 95%; }
nav.recagents-nav:last-child { border-top: 1px solid #ddd; border-bottom: 0; margin: 1em 0 0; }
details.recagents-fold { margin: .3em 0; }
details.recagents-fold > summary { cursor: pointer; color: #555; padding: .2em 1em;
  font-size: 92%; }
math[display="block"] { display: block; margin: .6em 0; overflow-x: auto; }
"""

# The head keeps nbconvert's styles but none of its scripts (require.js, MathJax, mermaid and
# the widget manager all come from a CDN); cells marked by ``annotate`` are folded; an image
# output marked with an alt text gets it on its <img> (nbconvert writes none of its own).
_TEMPLATE = (
    """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{% block extra_css %}<style type="text/css">"""
    + _STYLE
    + """</style>{% endblock extra_css %}
{%- block body_header -%}{{ super() }}
{{ resources.get('recagents_nav', '') }}
{%- endblock body_header -%}
{% block body_footer %}{{ resources.get('recagents_nav', '') }}
{{ super() }}{% endblock body_footer %}
{% block codecell %}
{%- set page = cell.metadata.get('"""
    + PAGE_KEY
    + """', {}) -%}
{%- if page.get('fold') == 'cell' -%}
<details class="recagents-fold"><summary>{{ page.get('summary', '') | escape_html }}</summary>
{{ super() }}
</details>
{%- else -%}{{ super() }}{%- endif -%}
{% endblock codecell %}
{% block input_group -%}
{%- set page = cell.metadata.get('"""
    + PAGE_KEY
    + """', {}) -%}
{%- if page.get('fold') == 'input' -%}
<details class="recagents-fold"><summary>{{ page.get('summary', '') | escape_html }}</summary>
{{ super() }}
</details>
{%- else -%}{{ super() }}{%- endif -%}
{% endblock input_group %}
{% macro with_alt(rendered, output) -%}
{%- set alt = output.metadata.get('"""
    + PAGE_KEY
    + """', {}).get('alt', '') -%}
{%- if alt -%}{{ rendered | replace('<img ', '<img alt="' ~ (alt | escape_html) ~ '" ', 1) }}
{%- else -%}{{ rendered }}{%- endif -%}
{%- endmacro %}
{% block data_png scoped %}{{ with_alt(super(), output) }}{% endblock data_png %}
{% block data_jpg scoped %}{{ with_alt(super(), output) }}{% endblock data_jpg %}
{% block data_svg scoped %}{{ with_alt(super(), output) }}{% endblock data_svg %}
"""
)


class _MathMLRenderer(IPythonRenderer):
    """nbconvert's markdown renderer, with every formula written as MathML."""

    def block_math(self, body: str) -> str:
        r"""``$$...$$`` and ``\[...\]``: a display formula."""
        return latex_to_mathml(body, display=True)

    def latex_environment(self, name: str, body: str) -> str:
        r"""A bare ``\begin{env}...\end{env}``: a display formula."""
        return latex_to_mathml(f"\\begin{{{name}}}{body}\\end{{{name}}}", display=True)

    def inline_math(self, body: str) -> str:
        r"""``$...$`` and ``\(...\)``: a formula in the line."""
        return latex_to_mathml(body, display=False)


class OfflineHTMLExporter(HTMLExporter):
    """nbconvert's HTML exporter with MathML for math and the page template of this module."""

    @pass_context
    def markdown2html(self, context: Any, source: str) -> str:
        """Markdown to HTML as nbconvert does it, but math to MathML (no MathJax needed)."""
        cell = context.get("cell", {})
        renderer = _MathMLRenderer(
            escape=False,
            attachments=cell.get("attachments", {}),
            embed_images=self.embed_images,
            path=context.get("resources", {}).get("metadata", {}).get("path", ""),
            anchor_link_text=self.anchor_link_text,
            exclude_anchor_links=self.exclude_anchor_links,
            **self.lexer_options,
        )
        return str(MarkdownWithMath(renderer=renderer).render(source))


def offline_exporter() -> HTMLExporter:
    """The exporter of the published pages (see the module docstring)."""
    return OfflineHTMLExporter(
        extra_loaders=[DictLoader({TEMPLATE_NAME: _TEMPLATE})], template_file=TEMPLATE_NAME
    )
