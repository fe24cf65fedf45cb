"""What keeping the line's announcements costs (app/web/lane.py, issue #37): the simulation lane's line on a fake
clock, with clients that come back exactly when told, under a load near the two slots' capacity, runs whose time
varies about the pace (lognormal, SIGMA), newcomers at random. For each line it prints the requests finished in
the window, and over the requests told to come back: the most any waited for its place over its Retry-After, and
how many waited longer than told.

Lines compared: no hold (a slot whose place's client is away goes to whoever is next, as before issue #37's fix),
the pace the last request's; the hold with the last request's pace; and the hold as shipped, at the slowest pace of
the last PACE_WINDOW requests. Holding a slot for its absent client keeps the announcement, at the cost of the time the
slot waits for a client announced later than its turn came.

    .venv/bin/python bench/bench_line.py [--seconds 600] [--seeds 3]
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.web import lane  # noqa: E402
from app.web.lane import FairLine  # noqa: E402

RUN_S, WORK = 3.0, 3  # seconds a run takes on average; runs a request simulates
ARRIVALS_PER_S = 0.2  # x 3 runs x 3 s = 1.8 slot-seconds a second on 2 slots: 90% busy
TICK_S = 0.1
SIGMA = (0.1, 0.3)
LINES = {  # name: (RETURN_GRACE_S, PACE_WINDOW)
    "no hold, last pace": (-1e9, 1),
    "hold, last pace": (2.0, 1),
    "hold, slowest of the last 8 (shipped)": (lane.RETURN_GRACE_S, lane.PACE_WINDOW),
}


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def simulate(grace_s: float, window: int, sigma: float, seconds: float, seed: int) -> tuple[int, float, int, int]:
    """(requests finished within `seconds`, the most a told request waited over its Retry-After, how many waited
    longer, how many were told)."""
    rng = random.Random(seed)
    lane.RETURN_GRACE_S, lane.PACE_WINDOW = grace_s, window  # what FairLine reads
    clock = Clock()
    line = FairLine(2, 500, 15.0, clock)
    line.paces = deque([RUN_S] * window, maxlen=window)
    due, running, joined, admitted, finished = {}, {}, {}, {}, 0
    for tick in range(int((seconds + 300) / TICK_S)):
        now = clock.now = tick * TICK_S
        for place, end in list(running.items()):
            if end <= now:
                del running[place]
                line.leave(place)
                finished += end < seconds
        if now < seconds and rng.random() < TICK_S * ARRIVALS_PER_S:
            turn = line.join(work=WORK)
            joined[turn.place.id] = (now, turn.place, None if turn.place.present else turn.retry_after)
            if not turn.place.present:
                due[turn.place.id] = now + turn.retry_after
        for ticket, at in list(due.items()):
            if at <= now:
                del due[ticket]
                turn = line.join(ticket=ticket)
                if not turn.place.present:
                    due[ticket] = now + turn.retry_after
        line.poll()
        for ticket, (_, place, _) in joined.items():
            if place.admitted and ticket not in admitted:
                admitted[ticket] = now
                running[place] = now + sum(RUN_S * rng.lognormvariate(0, sigma) for _ in range(WORK))
    told = [(admitted[t] - at) / ra for t, (at, _, ra) in joined.items() if ra and t in admitted]
    return finished, max(told, default=0.0), sum(r > 1 + 1e-9 for r in told), len(told)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    kept = lane.RETURN_GRACE_S, lane.PACE_WINDOW
    print(f"{'line':40} {'sigma':>5} {'finished':>8} {'worst wait / Retry-After':>25} {'late / told':>12}")
    for sigma in SIGMA:
        for name, (grace_s, window) in LINES.items():
            rows = [simulate(grace_s, window, sigma, args.seconds, seed) for seed in range(args.seeds)]
            print(f"{name:40} {sigma:5.1f} {sum(r[0] for r in rows):8d} {max(r[1] for r in rows):25.3f} "
                  f"{sum(r[2] for r in rows):5d} / {sum(r[3] for r in rows):<5d}")
    lane.RETURN_GRACE_S, lane.PACE_WINDOW = kept


if __name__ == "__main__":
    main()
