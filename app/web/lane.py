"""The line for the simulation lane: first come, first served, with a place a client can leave and come back to.

Requests that may simulate take a place in one line (FairLine.join). At most `slots` of them run at once; the rest
wait in arrival order, and each is admitted before anyone who arrived after it. A place is announced with its
position and an estimated wait: the work ahead of it (what the running requests have left, and the work of every
place before it, each request's work counted in runs) at the pace runs have taken lately (a moving average), over
the slots (never faster than the running requests are going). A request whose wait would be short keeps its connection and is admitted in its turn; one whose wait
is longer than `hold_s` is answered at once (503 with Retry-After: that wait) and keeps its place under a ticket:
coming back with it (the Queue-Ticket header) resumes the place, so a client that retries when told is served in
its turn, not by lottery against newcomers. A place left empty past its announced time (plus CLAIM_GRACE_S) is
given up. Places skipped while their client is away are not held open: whoever is waiting behind runs meanwhile,
and the returning client goes first at the next free slot. Past `max_line` places, the answer is 503 with the time
the line needs to drain to where a newcomer would fit.

Everything here runs on the event loop (one thread): no locks; `clock` is injectable for tests.
"""

from __future__ import annotations

import itertools
import math
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

# Seconds a run took before the line has seen any (a small page's two schedulers take about a second each on a
# laptop core); from then on the moving average of what runs took here.
INITIAL_RUN_S = 1.0
PACE_WEIGHT = 0.2  # weight of the latest request's pace in the moving average
# Seconds a client told to come back has, after its announced time, to claim its place before it is given up.
CLAIM_GRACE_S = 15.0


@dataclass(eq=False)
class Place:
    id: str
    seq: int
    work: float  # runs this request may simulate
    present: bool = True  # its client's connection is waiting (False: told to come back with the ticket)
    admitted: bool = False
    started: float = 0.0
    expires: float = math.inf  # an absent place not claimed by then is given up
    on_admit: Callable[[], None] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Turn:
    """What joining the line answers: the place (None: the line is full), its position (0: admitted now; k: k-th
    in line) and the estimated seconds until its turn."""

    place: Place | None
    position: int
    wait_s: float

    @property
    def retry_after(self) -> int:
        return max(1, math.ceil(self.wait_s))


class FairLine:
    def __init__(self, slots: int, max_line: int, hold_s: float, clock: Callable[[], float] = time.monotonic):
        self.slots, self.max_line, self.hold_s, self.clock = slots, max_line, hold_s, clock
        self.run_s = INITIAL_RUN_S  # seconds a run takes here lately (moving average)
        self._line: OrderedDict[str, Place] = OrderedDict()  # waiting places, in arrival order
        self._running: list[Place] = []
        self._seq = itertools.count()

    @property
    def waiting(self) -> int:
        return len(self._line)

    @property
    def running(self) -> int:
        return len(self._running)

    def join(
        self, work: float = 1.0, ticket: str | None = None, on_admit: Callable[[], None] | None = None
    ) -> Turn:
        """A place for a request of `work` runs: the place its ticket holds if it names one still in line, else a
        new one at the end. Admitted at once when a slot is free and nobody present is ahead of it."""
        self._give_up_expired()
        place = self._line.get(ticket) if ticket else None
        if place is None:
            if len(self._line) + len(self._running) >= self.max_line:
                return Turn(None, len(self._line) + 1, self._work_ahead(None) * self.pace_s() / self.slots)
            place = Place(secrets.token_urlsafe(12), next(self._seq), max(work, 0.0))
            self._line[place.id] = place
        place.present, place.expires, place.on_admit = True, math.inf, on_admit
        self._admit()
        if place.admitted:
            return Turn(place, 0, 0.0)
        wait = self.wait_s(place)
        if wait > self.hold_s:  # too long to hold a connection: the client comes back with its ticket
            place.present, place.on_admit = False, None
            place.expires = self.clock() + wait + CLAIM_GRACE_S
        return Turn(place, self.position(place), wait)

    def leave(self, place: Place) -> None:
        """The request is done (admitted: its pace is recorded) or gone while waiting; the next in line runs."""
        if place.admitted:
            if place in self._running:
                self._running.remove(place)
                if place.work > 0:
                    pace = (self.clock() - place.started) / place.work
                    self.run_s += PACE_WEIGHT * (pace - self.run_s)
        else:
            self._line.pop(place.id, None)
        self._admit()

    def position(self, place: Place) -> int:
        """1 + the places ahead of it in line (0 once admitted)."""
        if place.admitted:
            return 0
        return 1 + sum(1 for p in self._line.values() if p.seq < place.seq)

    def pace_s(self) -> float:
        """Seconds a run takes here: the recent average, or more while a running request has already taken longer
        a run than that (before any has finished, the average is only INITIAL_RUN_S)."""
        now = self.clock()
        return max([self.run_s] + [(now - p.started) / p.work for p in self._running if p.work > 0])

    def wait_s(self, place: Place) -> float:
        """Estimated seconds until `place` is admitted: the work ahead of it over the slots."""
        return 0.0 if place.admitted else self._work_ahead(place) * self.pace_s() / self.slots

    def _work_ahead(self, place: Place | None) -> float:
        """Runs ahead of `place` (None: of a newcomer at the end): what the running requests have left at the
        current pace, and the work of each place before it."""
        now, pace = self.clock(), self.pace_s()
        left = sum(max(0.0, p.work - (now - p.started) / pace) for p in self._running)
        return left + sum(p.work for p in self._line.values() if place is None or p.seq < place.seq)

    def _admit(self) -> None:
        while len(self._running) < self.slots:
            nxt = next((p for p in self._line.values() if p.present), None)
            if nxt is None:
                return
            del self._line[nxt.id]
            nxt.admitted, nxt.started = True, self.clock()
            self._running.append(nxt)
            if nxt.on_admit is not None:
                nxt.on_admit()

    def _give_up_expired(self) -> None:
        now = self.clock()
        for p in [p for p in self._line.values() if not p.present and p.expires < now]:
            del self._line[p.id]

    def state(self) -> dict:
        return {
            "running": self.running,
            "waiting": self.waiting,
            "slots": self.slots,
            "max_line": self.max_line,
            "run_s": round(self.run_s, 3),
        }
