"""What each trace replay mode (--replay timestamps|sessions|closed) does to TTFT and prefix-cache hits, and how
well each keeps the recorded per-request timing, on the bundled Claude Code (Weka) session and on Qwen-Bailian
rows in its README's schema (no Bailian sample could be fetched: sim_core/data/traces/README.md).

Per mode: TTFT p50/p99, prefix-cache hit rate, the requests sent before what they waited for was answered
(recorded parent, or a subagent their agent joins), and against the trace: the mean |send - recorded send| and,
where the trace records think times (Weka), the mean |simulated gap - recorded think time| between a request's
dependency being answered and its send. Run: NUMBA_CACHE_DIR=.numba_cache .venv/bin/python bench/bench_replay_modes.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_replay import bailian_rows, waited_for  # noqa: E402  (the test's Bailian rows and dependency rule)

from sim_core import Scenario, run  # noqa: E402
from sim_core.trace_formats import read_trace_records  # noqa: E402
from sim_core.trace_formats.sessions import recorded_parents, session_requests  # noqa: E402
from sim_core.traces import read_trace_file_records  # noqa: E402


def rows_of(parsed, result, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """(sent, done) per trace row: the run's requests are in the trace's order except in sessions mode."""
    if mode != "sessions":
        return result.requests.arrival_s, result.finish_s
    _, order = session_requests(parsed)
    at = np.empty(len(order), np.int64)
    at[order] = np.arange(len(order))
    return result.requests.arrival_s[at], result.finish_s[at]


def report(name: str, trace: str, parsed, server: dict) -> None:
    print(f"\n{name}: {len(parsed.requests)} requests; server {server}")
    print(
        f"{'mode':<22}{'TTFT p50 ms':>12}{'p99 ms':>10}{'hit %':>8}{'early':>7}{'|send-rec| s':>14}{'|gap-think| s':>15}"
    )
    deps = waited_for(parsed)
    parent = recorded_parents(parsed)
    think = parsed.fields.get("think_s")
    for mode, extra in (
        ("timestamps", {}),
        ("sessions", {}),
        ("closed", {"concurrency": 1}),
        ("closed", {"concurrency": 8}),
    ):
        result = run(Scenario(trace=trace, replay=mode, **server, **extra))
        sent, done = rows_of(parsed, result, mode)
        early = sum(1 for x, rows in enumerate(deps) if rows and sent[x] < max(done[rows]) - 1e-9)
        send_err = float(np.mean(np.abs(sent - parsed.requests.arrival_s)))
        gap = "-"
        if think is not None:
            has = (parent >= 0) & ~np.isnan(think)
            gap = f"{np.mean(np.abs(sent[has] - done[parent[has]] - think[has])):.1f}"
        m = result.metrics
        label = mode + (f" x{extra['concurrency']}" if extra else "")
        print(
            f"{label:<22}{m['ttft_ms']['p50']:>12.0f}{m['ttft_ms']['p99']:>10.0f}"
            f"{100 * m['prefix_cache_hit_rate']:>8.1f}{early:>7}{send_err:>14.1f}{gap:>15}"
        )


def main() -> None:
    weka = "weka-cc-trace-0291"
    for hardware, tp in (("h100", 4), ("a100", 4)):
        report(
            "Claude Code (Weka) trace_0291",
            weka,
            read_trace_file_records(weka, 10_000),
            dict(hardware=hardware, tp=tp, model="llama-3.3-70b", prefix_cache="on", block_size=64),
        )
    rows = bailian_rows(sessions=200)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bailian.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
        parsed = read_trace_records(path.read_text(encoding="utf-8"), 10_000)
        for kv_blocks in (
            None,
            2000,
        ):  # the GPU's whole pool, then 32k tokens: turns evict each other's prefixes
            report(
                f"Qwen-Bailian-shaped rows (README schema, synthetic), kv_blocks {kv_blocks or 'all'}",
                str(path),
                parsed,
                dict(
                    hardware="a100",
                    tp=1,
                    model="llama-3-8b",
                    prefix_cache="on",
                    block_size=16,
                    kv_blocks=kv_blocks,
                ),
            )


if __name__ == "__main__":
    main()
