"""How an embed (`/embed/{figure}?...`) shows its figure: size, one scheduler's panel, caption, buttons, present mode. These
query parameters say how to show the figure, not what to simulate; each bad one is reported with its field and
what is allowed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sim_core.quoting import quote

# An embedded figure's size in CSS pixels (`/embed/{figure}?width=&height=`): from a thumbnail to a 4K slide.
EMBED_WIDTH_PX = (240, 3840)
EMBED_HEIGHT_PX = (160, 2160)
EMBED_CAPTION_MAX_CHARS = 200
# Query parameters of an embed that say how to show the figure, not what to simulate.
EMBED_OPTIONS = ("width", "height", "caption", "chrome", "present")


@dataclass(frozen=True)
class EmbedOptions:
    """How an embed shows its figure: its size (None: the frame's), one scheduler's panel only, a caption under
    the figure ("1": the scenario's; other text as given), whether its buttons and links show, and present mode
    (the figure fills the window; the arrow keys step to the previous or next figure, static/js/embed.js)."""

    width: int | None = None
    height: int | None = None
    scheduler: str | None = None
    caption: str = ""
    chrome: bool = True
    present: bool = False


def parse_embed_options(params: Mapping[str, str]) -> tuple[EmbedOptions, list[tuple[str, str]]]:
    """EmbedOptions from an embed's query (the scheduler is checked against the comparison by the caller), and
    the problems, each naming its field and what is allowed."""
    problems: list[tuple[str, str]] = []
    sizes: dict[str, int | None] = {}
    for name, (lo, hi) in (("width", EMBED_WIDTH_PX), ("height", EMBED_HEIGHT_PX)):
        raw = params.get(name)
        sizes[name] = None
        if raw in (None, ""):
            continue
        try:
            value = int(raw)
        except ValueError:
            problems.append((name, f"must be a whole number of pixels between {lo} and {hi} (got {quote(raw)})"))
            continue
        if not lo <= value <= hi:
            problems.append((name, f"must be between {lo} and {hi} pixels (got {value})"))
            continue
        sizes[name] = value
    chrome = params.get("chrome", "1")
    if chrome not in ("0", "1"):
        problems.append(("chrome", f"must be 0 (the figure alone, no buttons) or 1 (got {quote(chrome)})"))
    present = params.get("present", "0")
    if present not in ("0", "1"):
        problems.append(("present", f"must be 0 or 1 (present mode: the arrow keys step through the figures; got "
                                    f"{quote(present)})"))
    caption = params.get("caption", "")
    if len(caption) > EMBED_CAPTION_MAX_CHARS:
        problems.append(("caption", f"must be at most {EMBED_CAPTION_MAX_CHARS} characters, or 1 for the "
                                    f"scenario's own caption (got {len(caption)})"))
        caption = ""
    options = EmbedOptions(sizes["width"], sizes["height"], params.get("scheduler") or None,
                           "" if caption == "0" else caption, chrome != "0", present == "1")
    return options, problems
