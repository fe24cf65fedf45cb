"""The documentation a newcomer reads first: README.md stays short, its set-up commands are the ones the
repository runs, and no link in README.md or docs/*.md points at a file that is not there."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 200  # issue 21: the README is an entry point; the detail lives in docs/

# [text](target) and ![alt](target), plus src="..." / href="..." in inline HTML. A target may carry a title
# ("target 'title'") or an #anchor; only the path part is checked.
MD_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+[\"'][^)]*[\"'])?\s*\)")
HTML_LINK = re.compile(r"""\b(?:src|href)\s*=\s*["']([^"']+)["']""")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, https:, mailto:, ...


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def relative_links(path: Path) -> list[str]:
    """Every relative link target in a Markdown file (a bare #anchor included), outside code spans and fenced or
    indented code blocks (where a `[x](y)` is an example, not a link)."""
    text, targets, fenced, code = path.read_text(encoding="utf-8"), [], False, False
    previous = ""
    for line in text.splitlines():
        # An indented code block starts after a blank line; 4 spaces right after text continue a list item.
        code = line.startswith("    ") and (code or not previous.strip())
        previous = line
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or code:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        for target in MD_LINK.findall(line) + HTML_LINK.findall(line):
            if not EXTERNAL.match(target):
                targets.append(target)
    return targets


def anchors(path: Path) -> set[str]:
    """The #anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped, spaces to hyphens."""
    heads = re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", path.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def broken_links(path: Path) -> list[str]:
    """Targets whose file does not exist, or whose #anchor names no heading of a Markdown target."""
    out = []
    for target in relative_links(path):
        name, _, anchor = target.partition("#")
        file = path.parent / name if name else path
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in anchors(file)):
            out.append(target)
    return out


def test_readme_is_at_most_200_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move detail into docs/")


def test_every_relative_link_in_the_docs_exists():
    files = markdown_files()
    assert len(files) > 1, "docs/ has no Markdown pages"
    broken = {str(p.relative_to(ROOT)): broken_links(p) for p in files}
    assert not any(broken.values()), {k: v for k, v in broken.items() if v}


def test_readme_links_every_docs_page_and_shows_the_screenshot():
    targets = {t.split("#", 1)[0] for t in relative_links(README)}
    for page in sorted(DOCS.glob("*.md")):
        assert f"docs/{page.name}" in targets, f"README.md does not link docs/{page.name}"
    images = [t for t in targets if t.endswith(".png")]
    assert images, "README.md shows no screenshot"
    for image in images:
        size = (ROOT / image).stat().st_size
        assert size < 400 * 1024, f"{image} is {size} bytes: compress it (pngquant) before committing"


def test_link_checker_catches_a_missing_file(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("# Part one: the start\n", encoding="utf-8")
    page.write_text("# Here\n[ok](there.md#part-one-the-start) [gone](missing.md) ![img](img/none.png) "
                    "[web](https://example.org) [self](#here) [no such part](there.md#part-two) [nor](#there)\n"
                    "`[code](not-a-link.md)`\n\n    [indented](example.md)\n\n- item\n    [list](gone.md)\n", encoding="utf-8")
    assert broken_links(page) == ["missing.md", "img/none.png", "there.md#part-two", "#there",
                                   "gone.md"]


def _ci_test_command() -> str:
    """The command .ci/run hands over to: its last `exec` line."""
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    execs = [line.strip() for line in run.splitlines() if line.strip().startswith("exec ")]
    assert execs, ".ci/run no longer ends in an exec line: update this test to read what it runs"
    return execs[-1].removeprefix("exec ").strip()


def test_readme_test_command_is_what_ci_runs():
    command = _ci_test_command()
    readme = README.read_text(encoding="utf-8")
    shown = [line.strip() for line in readme.splitlines() if line.startswith("    bash scripts/")]
    assert command in shown, f"README.md does not show the command .ci/run runs ({command}); it shows {shown}"
    assert "CI runs exactly this through `.ci/run`" in readme


def test_readme_set_up_scripts_exist():
    readme = README.read_text(encoding="utf-8")
    scripts = re.findall(r"^    bash (scripts/\S+)", readme, re.M)
    assert {"scripts/serve.sh", "scripts/test.sh"} <= set(scripts)
    for script in scripts:
        assert (ROOT / script).is_file(), script
