"""The Weka / Claude Code agentic traces (SemiAnalysis `cc-traces-weka-*` on Hugging Face, built by
callanjfox/agentic-coding-analysis and replayed by callanjfox/kv-cache-tester, AIPerf's AgentX and BLIS's
`convert weka`): one JSON object a line, one Claude Code session each:

    {"id", "models", "block_size": 64, "hash_id_scope": "local"|"global", "tool_tokens", "system_tokens",
     "requests": [{"t", "type": "n"|"s", "model", "in", "out", "hash_ids", "input_types", "output_types",
                   "stop", "api_time", "ttft", "think_time"},
                  {"t", "type": "subagent", "agent_id", "subagent_type", "requests": [...]}, ...]}

`t` is seconds from the session's start, `hash_ids` the chained hashes of the prompt's whole `block_size`-token
blocks (a partial last block is not hashed: agentic-coding-analysis README, "How Caching Works"); with scope
"local" equal ids are equal blocks only within one session. Subagents' requests are flattened into the session.
The sessions carry no start time of their own: each starts at 0, as they do at unlimited concurrency in AIPerf.
A session's line can be megabytes long (4.2 MB is the longest in kv-cache-tester's 739); its hash lists are
parsed straight into int64 arrays, so a line costs about twice its length in memory, the file never whole."""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from ..quoting import quote
from .common import ParsedTrace, TraceBuilder, TraceError, hash_ids, json_object, seconds, token_count

WEKA_MAX_LINE_CHARS = 64 << 20  # 15 times the longest session line measured (above)
# A "local" session's block ids are kept apart as (session << LOCAL_ID_BITS) + id.
LOCAL_ID_BITS = 24
MAX_LOCAL_SESSIONS = 1 << 15
WEKA_FIELDS = {
    "session": "q",
    "turn": "q",
    "agent": "q",
    "depth": "q",
    "parent": "q",
    "think_s": "d",
    "api_s": "d",
    "ttft_s": "d",
    "stop": "q",
    "thinking": "q",
    "model": "q",
}
# A list of up to 15-digit ids: read by numpy, not as Python ints (a session's lists run to millions of ids).
_HASH_LIST = re.compile(r'"hash_ids"\s*:\s*\[(\s*\d{1,15}(?:\s*,\s*\d{1,15})*\s*)?\]')


def is_weka_head(text: str) -> bool:
    """Whether the start of a line is a Weka session's (its keys come before the long request list)."""
    head = text.lstrip()[:4096]
    return head.startswith("{") and '"requests"' in head and '"block_size"' in head


def _lift_hash_lists(line: str) -> tuple[str, list[np.ndarray]]:
    """The line with each well-formed hash_ids list replaced by {"$lifted": k}, and the lists as arrays."""
    arrays: list[np.ndarray] = []

    def lift(match: re.Match) -> str:
        body = match.group(1)
        arrays.append(np.fromstring(body, np.int64, sep=",") if body else np.zeros(0, np.int64))
        return f'"hash_ids":{{"$lifted":{len(arrays) - 1}}}'

    return _HASH_LIST.sub(lift, line), arrays


class _Session:
    """One session's reading state: its number, ids' namespace and the rows it has added."""

    def __init__(self, line_no: int, index: int, row: dict, out: TraceBuilder, lifted: list[np.ndarray]):
        self.line_no, self.index, self.out, self.lifted = line_no, index, out, lifted
        self.local = row.get("hash_id_scope", "global") == "local"
        if row.get("hash_id_scope", "global") not in ("local", "global"):
            raise TraceError(
                f"line {line_no}: hash_id_scope must be local or global, got "
                f"{quote(row.get('hash_id_scope'))}"
            )
        if self.local and index >= MAX_LOCAL_SESSIONS:
            raise TraceError(
                f"line {line_no}: more than {MAX_LOCAL_SESSIONS} sessions with hash_id_scope local "
                f"(the limit)"
            )
        self.agents, self.turns = 0, 0

    def hashes(self, where: str, value: object) -> np.ndarray | list[int]:
        if isinstance(value, dict) and "$lifted" in value:
            value = self.lifted[value["$lifted"]]
        ids = hash_ids(self.line_no, [] if value is None else value, f"{where}.hash_ids")
        if not self.local:
            return ids
        ids = np.asarray(ids, np.int64)
        if len(ids) and ids.max() >= 1 << LOCAL_ID_BITS:
            raise TraceError(
                f"line {self.line_no}: {where}.hash_ids: a local id must be below "
                f"{1 << LOCAL_ID_BITS}, got {int(ids.max())}"
            )
        return ids + (self.index << LOCAL_ID_BITS)


def _optional_seconds(line_no: int, name: str, value: object) -> float | None:
    return None if value is None else seconds(line_no, name, value)


def _add_request(s: _Session, where: str, req: dict, agent: int, depth: int, parent: int, base: float) -> int:
    """One normal or streaming request as a row; its row number."""
    line_no, out = s.line_no, s.out
    for name in ("t", "in", "out"):
        if name not in req:
            raise TraceError(f"line {line_no}: {where} lacks field {name}")
    row = len(out)
    stop = {"": None, "tool_use": 1, "end_turn": 2}.get(str(req.get("stop", "")), 3)
    outputs = req.get("output_types")
    out.add(
        line_no,
        base + seconds(line_no, f"{where}.t", req["t"]),
        token_count(line_no, f"{where}.in", req["in"]),
        token_count(line_no, f"{where}.out", req["out"]),
        s.hashes(where, req.get("hash_ids")),
        session=s.index,
        turn=s.turns if agent == 0 else None,
        agent=agent,
        depth=depth,
        parent=None if parent < 0 else parent,
        think_s=_optional_seconds(line_no, f"{where}.think_time", req.get("think_time")),
        api_s=_optional_seconds(line_no, f"{where}.api_time", req.get("api_time")),
        ttft_s=_optional_seconds(line_no, f"{where}.ttft", req.get("ttft")),
        stop=stop,
        thinking=int(isinstance(outputs, list) and "thinking" in outputs),
        model=out.code("model", req.get("model", "")),
    )
    s.turns += agent == 0
    return row


def _subagent_start(s: _Session, where: str, marker: dict, base: float) -> float:
    """What a subagent's request times count from. kv-cache-tester's traces count them from the subagent's
    spawn, its first request at t=0.0, and the marker's t is when it *finished*: t - duration_ms is the spawn.
    In the bundled trace_0291 both Explore markers (t 1148.013 and 1180.553, durations 46.656 and 79.184 s) give
    a spawn of 1101.36 s, 0.7 s after the main request that called them ended (t 1085 + api_time 15.64), and
    their requests span 44.8 and 75.6 s; the same holds for every subagent of traces 0003, 0010, 0254 and 0270
    of the 739 (spawn within 1 s of the calling request's end, siblings spawned together). Without a
    duration_ms, the marker's t is taken as the spawn. AIPerf's fixtures count from the session's start instead
    (marker 2.0, first request 2.5): a first request after the marker can only be that."""
    marker_t = base + seconds(s.line_no, f"{where}.t", marker.get("t"))
    inner = marker.get("requests")
    first = (
        next((r.get("t") for r in inner if isinstance(r, dict) and r.get("type") != "subagent"), None)
        if isinstance(inner, list)
        else None
    )
    counts_from_spawn = (
        isinstance(first, int | float) and not isinstance(first, bool) and base + first < marker_t
    )
    if not counts_from_spawn:
        return base
    duration = marker.get("duration_ms")
    took = (
        0.0
        if duration is None
        else seconds(s.line_no, f"{where}.duration_ms", duration, scale=1e-3, unit="ms")
    )
    return max(base, marker_t - took)


def _flatten(
    s: _Session, where: str, requests: object, agent: int, depth: int, parent: int, base: float = 0.0
) -> None:
    """Every request of `requests` (a session's or a subagent's) as rows, at `base` + its t; a subagent's
    first request's parent is the request before the subagent's marker, each later one's the one before it."""
    if not isinstance(requests, list):
        raise TraceError(f"line {s.line_no}: {where} must be a list, got {quote(requests)}")
    for k, req in enumerate(requests):
        at = f"{where}[{k}]"
        if not isinstance(req, dict):
            raise TraceError(f"line {s.line_no}: {at} must be an object, got {quote(req)}")
        kind = req.get("type")
        if kind == "subagent":
            s.agents += 1
            start = _subagent_start(s, at, req, base)
            _flatten(s, f"{at}.requests", req.get("requests", []), s.agents, depth + 1, parent, start)
        elif kind in ("n", "s"):
            parent = _add_request(s, at, req, agent, depth, parent, base)
        else:
            raise TraceError(f"line {s.line_no}: {at}.type must be n, s or subagent, got {quote(kind)}")


def _block_size(line_no: int, row: dict, block_tokens: int | None) -> int:
    size = row.get("block_size")
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 1 << 16:
        raise TraceError(
            f"line {line_no}: block_size must be a whole number of tokens from 1 to 65536, got {quote(size)}"
        )
    if block_tokens is not None and size != block_tokens:
        raise TraceError(
            f"line {line_no}: block_size is {size}, but the trace's blocks were given as "
            f"{block_tokens} tokens (trace_block_tokens, or an earlier session's block_size)"
        )
    return size


def read_weka(lines: Iterable[str], max_rows: int, block_tokens: int | None = None) -> ParsedTrace:
    """Weka / Claude Code sessions (module docstring). Keeps, per request: session (its line's order), turn
    (the main agent's request count), agent (0 main, k the session's k-th subagent), depth (subagent nesting),
    parent (the row of the request before it in its agent's order), think_s, api_s, ttft_s (as recorded), stop
    (1 tool_use, 2 end_turn, 3 other), thinking (1 if the output had hidden thinking) and model."""
    out: TraceBuilder | None = None
    sessions = 0
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        text, lifted = _lift_hash_lists(line)
        row = json_object(line_no, text, "a Weka session")
        size = _block_size(line_no, row, block_tokens)
        if out is None:
            block_tokens = size
            out = TraceBuilder(max_rows, WEKA_FIELDS, size, text_fields=("model",), row_fields=("parent",))
        _flatten(_Session(line_no, sessions, row, out, lifted), "requests", row.get("requests"), 0, 0, -1)
        sessions += 1
    if out is None:
        raise TraceError("trace has no requests")
    return out.finish()
