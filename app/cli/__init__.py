"""The `sched-sim` command line.

    sched-sim run --scheduler chunked --workload rag --hardware a100 [--trace-out trace.json] [--json]
    sched-sim compare --schedulers fcfs,chunked --workload rag --hardware a100 --duration 10 [--json]
    sched-sim sweep --schedulers fcfs,chunked --hardware a100 --min-rate 2 --max-rate 18 --step 4 [--json]
    sched-sim serve [--host 127.0.0.1] [--port 8000]
    sched-sim list [--json]

`commands/` holds one module per subcommand (its flags, its handler, what only it prints); `dispatch` builds the
parser from them and holds `main`. `flags` generates the scenario flags from `sim_core.Scenario`'s fields
(`token_budget` -> `--token-budget`, help from the field's description and bounds), parsed as strings and
validated by `sim_core.parse_scenario`, so the command line, the dashboard's URLs and the JSON API accept exactly
the same things. `report` prints what several commands print (JSON, tables, the set-up); `results` run's and
compare's metrics tables; `simulate` runs them. User errors exit with status 2 and one line on stderr naming the
flag; an interrupt exits with 130.
"""

import gc
import os

# numpy starts one BLAS thread per core at import, which spin a while: ~0.1 CPU-s of a command that multiplies
# no large matrices (the engine uses none). Single-threaded unless the user set it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# A command is a short process, most of it importing numpy, numba, pydantic and sim_core: hundreds of thousands
# of objects that live until exit. The cyclic garbage collector would walk them again and again while they are
# built, and once more at exit; collection is off while importing, and what the imports built is frozen (left
# out of later collections). A 1000-request `sched-sim run`: ~0.85 -> ~0.66 s (bench/bench_startup.py).
_collecting = gc.isenabled()
gc.disable()
try:
    from . import worker
    from .dispatch import build_parser, main
    from .usage import EXIT_INTERRUPTED
finally:
    gc.freeze()
    if _collecting:
        gc.enable()


def entry() -> None:
    """The `sched-sim` console script: the command line run by this checkout's live worker, if any (app/cli/worker.py),
    else main(); then the output flushed and, when the command left nothing running
    (no thread, no child process, no Ray), an immediate exit. Tearing the interpreter down frees every module and
    numba's compiled libraries one by one, ~40 ms of a 0.6 s run, and nothing in it matters once the output is out
    (files the commands write are closed by then). With anything still running, the normal exit waits for it."""
    import sys

    try:
        code = worker.relay(sys.argv[1:])  # None: no live worker of these sources, or not to be used
    except KeyboardInterrupt:  # Ctrl-C while handing the command over: as main() answers one (the worker's child
        print("interrupted", file=sys.stderr)  # sees the client go and exits)
        code = EXIT_INTERRUPTED
    if code is None:
        code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):  # a reader that went away (main already said so), a closed stream
        sys.exit(code)
    if _nothing_left_running():
        os._exit(code)
    sys.exit(code)


def _nothing_left_running() -> bool:
    import sys
    import threading

    if threading.active_count() > 1 or "ray" in sys.modules:
        return False
    mp = sys.modules.get("multiprocessing")
    return mp is None or not mp.active_children()


__all__ = ["build_parser", "entry", "main"]
