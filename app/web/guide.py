"""`/guide/model` and `/guide/usage`: docs/MODEL.md and docs/USAGE.md as pages, so the form's mechanism sections
can link to the part of the docs that describes each one (`/guide/model#speculative-decoding`) on any server,
with no network. The Markdown is the small subset the docs use (headings, paragraphs, lists, fenced code,
tables, inline code, emphasis and links), rendered here rather than with a Markdown package the project does not
depend on; anything else shows as its text. Headings get GitHub's anchors, so the docs' own links still work."""

from __future__ import annotations

import html
import re

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from .templating import REPO_ROOT, templates

router = APIRouter(include_in_schema=False)
GUIDES = {"model": ("docs/MODEL.md", "What is modelled"), "usage": ("docs/USAGE.md", "How to use it")}
_HEADING = re.compile(r"^(#{1,4}) +(.*)$")
_INLINE = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*|\[([^\]]+)\]\(([^)\s]+)\)")


def slug(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def _inline(text: str) -> str:
    """One line's inline Markdown as HTML: code, bold, and links (a link to another file shows as its text)."""
    out, at = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[at:m.start()]))
        code, bold, label, href = m.groups()
        if code is not None:
            out.append(f"<code>{html.escape(code)}</code>")
        elif bold is not None:
            out.append(f"<b>{html.escape(bold)}</b>")
        elif href.startswith(("#", "https://")):
            out.append(f'<a href="{html.escape(href)}">{html.escape(label)}</a>')
        else:
            out.append(html.escape(label))
        at = m.end()
    return "".join(out) + html.escape(text[at:])


def render(markdown: str) -> str:
    """The docs' Markdown as HTML: blocks split on blank lines, a fenced block kept whole. A preformatted block
    may scroll sideways, so it is a Tab stop (keyboard users scroll it too)."""
    blocks, lines, fence = [], [], False
    for line in markdown.splitlines() + [""]:
        if line.startswith("```"):
            fence = not fence
            if not fence:
                blocks.append('<pre tabindex="0"><code>' + html.escape("\n".join(lines)) + "</code></pre>")
                lines = []
            continue
        if fence or line.strip():
            lines.append(line)
        elif lines:
            blocks.append(_block(lines))
            lines = []
    return "\n".join(blocks)


def _block(lines: list[str]) -> str:
    heading = _HEADING.match(lines[0])
    if heading and len(lines) == 1:
        level, title = len(heading.group(1)), heading.group(2).strip()
        return f'<h{level + 1} id="{slug(title)}">{_inline(title)}</h{level + 1}>'
    if lines[0].startswith("|") or lines[0].startswith("    "):  # a table, or an indented example: as written
        return '<pre tabindex="0">' + html.escape("\n".join(lines)) + "</pre>"
    if lines[0].startswith(("- ", "* ", "1. ")):
        items, current = [], []
        for line in lines:
            if re.match(r"^(- |\* |\d+\. )", line) and current:
                items.append(current)
                current = []
            current.append(re.sub(r"^(- |\* |\d+\. )", "", line).strip())
        items.append(current)
        return "<ul>" + "".join(f"<li>{_inline(' '.join(i))}</li>" for i in items) + "</ul>"
    return f"<p>{_inline(' '.join(line.strip() for line in lines))}</p>"


@router.get("/guide/{name}", response_class=HTMLResponse)
def guide(request: Request, name: str) -> HTMLResponse:
    if name not in GUIDES:
        ctx = {"request": request, "title": "No such guide", "body": "",
               "error": f"guide: no guide named {name!r}; the guides are " + ", ".join(GUIDES)}
        return templates.TemplateResponse(request, "guide.html", ctx, status_code=404)
    path, title = GUIDES[name]
    body = render((REPO_ROOT / path).read_text(encoding="utf-8"))
    return templates.TemplateResponse(request, "guide.html",
                                      {"request": request, "title": title, "body": body, "error": ""})
