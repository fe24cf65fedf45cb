"""Peak memory of reading a ~1 GB trace of each big format (issue #39): readers stream a file a line at a time
into arrays, so the peak follows what was parsed (8-16 bytes a number kept), not the file's size.

    .venv/bin/python bench/bench_trace_stream.py [--size-mb 1024] [--formats weka,mooncake,...] [--keep]

For each format, writes a synthetic file of about --size-mb under the temporary directory, shaped as the
published traces are (Weka: Claude Code sessions whose requests re-list the growing context's 64-token block ids;
Mooncake and Bailian: a shared first block then each request's own; OpenAI logs and AIPerf exports: one usage
record a line), reads it with sim_core.traces.read_trace_file_records in a fresh process (the product's row limit,
MAX_TRACE_ROWS) and prints the rows, the wall time and that process's peak RSS (ru_maxrss); then deletes the file
unless --keep. The formats of a few bytes a row (our CSV, Azure's, BurstGPT's) need more rows than the limit to
fill 1 GB: bench/bench_big_trace.py covers them (refused by the row count before parsing)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import resource, sys, time
from sim_core.runner import MAX_TRACE_ROWS
from sim_core.traces import read_trace_file_records
start = time.perf_counter()
parsed = read_trace_file_records(sys.argv[1], MAX_TRACE_ROWS, sys.argv[2])
reqs = parsed.requests
segments = 0 if reqs.seg_ids is None else len(reqs.seg_ids)
print(len(reqs), segments, int(reqs.prompt_tokens.sum()), time.perf_counter() - start,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def weka_sessions() -> Iterator[str]:
    """Sessions of 60 requests whose context grows from ~15k to ~100k tokens, each re-listing every block so
    far (local ids 1, 2, ...), with think and api times, as the kv-cache-tester traces are."""
    k = 0
    while True:
        requests, context, t = [], 15_000 + 97 * (k % 50), 0.0
        for turn in range(60):
            context += 1_400
            requests.append(
                {
                    "t": round(t, 1),
                    "type": "n",
                    "model": "claude-opus-4-5-20251101",
                    "in": context,
                    "out": 200 + 37 * (turn % 9),
                    "hash_ids": list(range(1, context // 64 + 1)),
                    "input_types": ["tool_result"],
                    "output_types": ["thinking", "tool_use"],
                    "stop": "tool_use",
                    "api_time": 6.5,
                    "think_time": 9.0,
                }
            )
            t += 15.5
        yield json.dumps(
            {
                "id": f"s{k}",
                "models": ["claude-opus-4-5-20251101"],
                "block_size": 64,
                "hash_id_scope": "local",
                "tool_tokens": 11_899,
                "system_tokens": 2_765,
                "requests": requests,
            },
            separators=(",", ":"),
        )
        k += 1


def mooncake_rows() -> Iterator[str]:
    """Rows as Mooncake's conversation trace: block 0 shared, then each request's own consecutive ids."""
    k, next_id = 0, 1
    while True:
        blocks = 2 + (k * 7919) % 40
        yield json.dumps(
            {
                "timestamp": k * 7,
                "input_length": 512 * blocks - 100,
                "output_length": 50 + k % 700,
                "hash_ids": [0] + list(range(next_id, next_id + blocks - 1)),
            }
        )
        k, next_id = k + 1, next_id + blocks - 1


def bailian_rows() -> Iterator[str]:
    """Qwen-Bailian rows: half new sessions, half a turn extending the previous one's blocks."""
    k, next_id, last = 0, 1, [0]
    while True:
        grow = 10 + (k * 31) % 200
        ids = (last if k % 2 else [0]) + list(range(next_id, next_id + grow))
        yield json.dumps(
            {
                "chat_id": k,
                "parent_chat_id": k - 1 if k % 2 else -1,
                "timestamp": k * 0.05,
                "input_length": 16 * len(ids) - 3,
                "output_length": 40 + k % 500,
                "type": "text",
                "turn": 1 + k % 2,
                "hash_ids": ids,
            }
        )
        k, next_id, last = k + 1, next_id + grow, ids


def openai_rows() -> Iterator[str]:
    k = 0
    while True:
        yield json.dumps(
            {
                "id": f"chatcmpl-{k:012d}",
                "object": "chat.completion",
                "created": 1_700_000_000 + k // 9,
                "model": "gpt-4o-mini",
                "session_id": f"sess-{k // 5}",
                "usage": {
                    "prompt_tokens": 200 + k % 3000,
                    "completion_tokens": 20 + k % 400,
                    "prompt_tokens_details": {"cached_tokens": 128 * (k % 3)},
                    "completion_tokens_details": {"reasoning_tokens": 0},
                },
            }
        )
        k += 1


def aiperf_rows() -> Iterator[str]:
    k = 0
    while True:
        yield json.dumps(
            {
                "metadata": {
                    "session_num": k,
                    "x_request_id": f"r{k}",
                    "conversation_id": f"c{k // 4}",
                    "turn_index": k % 4,
                    "request_start_ns": 1_759_813_207_532_900_363 + k * 10**7,
                    "request_end_ns": 1_759_813_207_838_764_604 + k * 10**7,
                    "benchmark_phase": "profiling",
                    "was_cancelled": False,
                },
                "metrics": {
                    "input_sequence_length": {"value": 550 + k % 900, "unit": "tokens"},
                    "time_to_first_token": {"value": 25.8, "unit": "ms"},
                    "request_latency": {"value": 297.5, "unit": "ms"},
                    "output_sequence_length": {"value": 9 + k % 300, "unit": "tokens"},
                },
                "error": None,
            }
        )
        k += 1


GENERATORS = {
    "weka": weka_sessions,
    "mooncake": mooncake_rows,
    "bailian": bailian_rows,
    "openai": openai_rows,
    "aiperf": aiperf_rows,
}


def write(path: Path, rows: Iterator[str], size: int) -> None:
    written = 0
    with open(path, "w", encoding="utf-8") as f:
        while written < size:
            line = next(rows) + "\n"
            f.write(line)
            written += len(line)


def measure(fmt: str, path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    start = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), fmt], capture_output=True, text=True, env=env, cwd=ROOT
    )
    wall = time.perf_counter() - start
    if p.returncode:
        print(f"{fmt}: exit {p.returncode}: {p.stderr.strip().splitlines()[-1]}")
        return
    rows, segments, tokens, parse_s, rss_kb = p.stdout.split()
    print(
        f"{fmt}: {path.stat().st_size / 2**30:.2f} GiB, {int(rows):,} requests, {int(segments):,} content "
        f"segments, {int(tokens) / 1e9:.2f} G prompt tokens: parsed in {float(parse_s):.0f} s "
        f"({wall:.0f} s with start-up), peak RSS {int(rss_kb) / 2**20:.2f} GiB"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument(
        "--formats", default=",".join(GENERATORS), help="comma-separated: " + ", ".join(GENERATORS)
    )
    ap.add_argument("--keep", action="store_true", help="keep the files (printed) instead of deleting them")
    args = ap.parse_args()
    for fmt in args.formats.split(","):
        path = Path(tempfile.gettempdir()) / f"bench_trace_stream.{fmt}.jsonl"
        write(path, GENERATORS[fmt](), args.size_mb << 20)
        try:
            measure(fmt, path)
        finally:
            if args.keep:
                print(f"  kept {path}")
            else:
                path.unlink()


if __name__ == "__main__":
    main()
