"""Peak memory of `sched-sim run --trace` on a 1 GB trace file (issue #26: the file was read whole, text and
Python lists, into 6.25 GB). A trace's rows are counted (its newlines, in 8 MiB chunks) before any is parsed, so
one over the row limit is refused at once; readers stream the file a line at a time into arrays, so a file with no
newline at all is refused within a bounded memory too, as is a sparse file (no disk used: NUL bytes, no newline).

    .venv/bin/python bench/bench_big_trace.py [--size-mb 1024] [--keep]

Writes each file under the temporary directory (deleted afterwards unless --keep), runs the CLI on it as a child
process, and prints its exit status, its error line, the wall time and the child's peak RSS
(resource.getrusage(RUSAGE_CHILDREN).ru_maxrss of a fresh child each time)."""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Each child measures one run: getrusage(RUSAGE_CHILDREN) in it reports the peak of its own (only) child.
CHILD = """
import resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
err = [line for line in p.stderr.splitlines() if line.strip()]
print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(err[-1] if err else "")
"""


def write_csv(path: Path, size: int) -> int:
    """A valid CSV trace of about `size` bytes (rows repeat a 1 MB block); the number of rows written."""
    rows, block = 0, []
    t = 0.0
    while sum(len(r) for r in block) < 1 << 20:
        t += 0.0137
        block.append(f"{t:.4f},{128 + len(block) % 900},{16 + len(block) % 200}\n")
    chunk = "".join(block).encode()
    with open(path, "wb") as f:
        f.write(b"arrival_s,prompt_tokens,output_tokens\n")
        written = 0
        while written < size:
            f.write(chunk)
            written += len(chunk)
            rows += len(block)
    return rows


def write_one_line(path: Path, size: int) -> None:
    """`size` bytes and not one newline (what /dev/zero or a binary file looks like to a line reader)."""
    chunk = b"1" * (1 << 20)
    with open(path, "wb") as f:
        for _ in range(size >> 20):
            f.write(chunk)


def measure(label: str, path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-c", CHILD, sys.executable, "-m", "app.cli", "run", "--trace", str(path),
           "--hardware", "a100", "--scheduler", "fcfs"]
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT).stdout.splitlines()
    wall = time.perf_counter() - start
    code, rss_kb = out[0].split()
    print(f"{label}: {path.stat().st_size / 2**30:.2f} GiB -> exit {code} in {wall:.1f} s, "
          f"peak RSS {int(rss_kb) / 2**20:.2f} GiB")
    print(f"  {out[1] if len(out) > 1 else ''}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--keep", action="store_true", help="keep the files (printed) instead of deleting them")
    args = ap.parse_args()
    size = args.size_mb << 20
    tmp = Path(tempfile.gettempdir())
    csv_path, line_path = tmp / f"big-trace-{os.getpid()}.csv", tmp / f"big-trace-{os.getpid()}-oneline.csv"
    try:
        rows = write_csv(csv_path, size)
        print(f"wrote {csv_path} ({rows:,} rows)")
        measure("CSV trace", csv_path)
        csv_path.unlink()
        write_one_line(line_path, size)
        measure("one line, no newline", line_path)
        line_path.unlink()
        with open(line_path, "wb") as f:
            f.truncate(size)
        measure("sparse file (NUL bytes)", line_path)
    finally:
        if not args.keep:
            for p in (csv_path, line_path):
                p.unlink(missing_ok=True)
    print(f"this process's own peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10:.0f} MiB")


if __name__ == "__main__":
    main()
