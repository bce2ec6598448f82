"""The report as one self-contained HTML page, rendered with markdown-it-py.

The Markdown of `evoduet_graph.report.markdown.report_markdown` (headings, GitHub-style
tables, fenced code, block quotes, images) is rendered by `markdown-it-py` (CommonMark with
the table rule; raw HTML in the Markdown is escaped, never passed through). Two renderer
rules are the report's own: images are read (relative to ``base``) and inlined as base64
``data:`` URIs so the one file can be mailed, and ``diff`` code blocks colour their added,
removed and hunk lines.
"""

from __future__ import annotations

import base64
import html as _html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

_HTML_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
pre { background: #f7f7f7; border: 1px solid #e3e3e3; padding: 0.6em; overflow-x: auto;
      font-size: 0.85em; }
code { font-family: Menlo, Consolas, monospace; }
blockquote { border-left: 4px solid #e0b000; margin: 0; padding: 0.2em 1em; background: #fffbe6; }
img { max-width: 100%; border: 1px solid #eee; }
.add { color: #116329; } .del { color: #a40e26; } .hunk { color: #6f42c1; }
"""


def _diff_highlight(code: str, lang: str, _attrs: str) -> str:
    """``diff`` blocks with added/removed/hunk lines in coloured spans; other code plain."""
    if lang != "diff":
        return ""  # markdown-it escapes and wraps it itself
    rendered = []
    for line in code.rstrip("\n").split("\n"):
        esc = _html.escape(line)
        if line.startswith("+"):
            esc = f'<span class="add">{esc}</span>'
        elif line.startswith("-"):
            esc = f'<span class="del">{esc}</span>'
        elif line.startswith("@@"):
            esc = f'<span class="hunk">{esc}</span>'
        rendered.append(esc)
    return '<pre><code class="language-diff">' + "\n".join(rendered) + "</code></pre>\n"


def _image_rule(base: Path | None) -> Any:
    """A markdown-it image rule that inlines the PNG at the link as a ``data:`` URI."""

    def render(_renderer: Any, tokens: Sequence[Token], idx: int, _options: Any, _env: Any) -> str:
        token = tokens[idx]
        link = str(token.attrGet("src") or "")
        alt = "".join(child.content for child in token.children or [])
        path = Path(link) if Path(link).is_absolute() or base is None else base / link
        try:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
        except OSError:
            return f"<em>missing image {_html.escape(link)}</em>"
        return f'<img alt="{_html.escape(alt)}" src="data:image/png;base64,{data}">'

    return render


def markdown_to_html(markdown: str, *, base: Path | None = None, title: str = "Report") -> str:
    """A self-contained HTML page of ``markdown`` (see the module docstring).

    Args:
        markdown: the report's Markdown.
        base: the folder image links are relative to (None: as given).
        title: the page title.

    Returns:
        The whole HTML document; images that cannot be read say so in place.
    """
    md = MarkdownIt("commonmark", {"html": False, "highlight": _diff_highlight}).enable("table")
    md.add_render_rule("image", _image_rule(base))
    body = md.render(markdown)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_html.escape(title)}</title><style>{_HTML_STYLE}</style></head>"
        f"<body>\n{body}\n</body></html>\n"
    )
