"""The line for the simulation lane: first come, first served, with a place a client can leave and come back to.

Requests that may simulate take a place in one line (FairLine.join). At most `slots` of them run at once; the rest
wait in arrival order, and each is admitted before anyone who arrived after it. A place is announced with its
position and its turn: when a slot frees for it, the slots' work laid out in line order (what the running requests
have left, then each place before it, each request's work counted in runs) at the pace of a run here (the slowest
of the last few requests', never faster than a running request is going). A request whose turn is near keeps its
connection and is admitted in its turn; one whose turn is further than `hold_s` is answered at once (503 with
Retry-After: its turn) and keeps its place under a ticket: coming back with it (the Queue-Ticket header) resumes
the place. No turn is announced before the line has seen a request finish (a cold server knows no pace: its
first announcements, at INITIAL_RUN_S, were a third of the runs' time under load): until then a far place is held
as a near one is, for at most `hold_s`, and then told its turn (send_away) at what the running requests' own pace
shows by then. A held place whose turn slips past `hold_s` is told the same way. The announcement is kept: when a place's turn comes while its client is away, its slot waits for it
until its announced time (plus RETURN_GRACE_S), so nobody who arrived later is admitted first, and a client that
comes back when told is admitted then, unless the runs ahead ran slower than the pace announced. Past that grace
the slot goes to whoever is next; the place is kept, first at the next free slot, until CLAIM_GRACE_S after its
time, then given up. Past `max_line` places, the answer is 503 with the time the line needs to drain to where a
newcomer would fit.

Everything here runs on the event loop (one thread): no locks; `clock` is injectable for tests.
"""

from __future__ import annotations

import heapq
import itertools
import math
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

# Seconds a run took before the line has seen any (a small page's two schedulers take about a second each on a
# laptop core); from then on the slowest pace of the last PACE_WINDOW requests: runs of one size vary by their
# seed and by what else the machine does, and an announcement at their average would be late for half of them.
INITIAL_RUN_S = 1.0
PACE_WINDOW = 8
# Seconds a slot waits past a place's announced time for its client (who sleeps Retry-After, then asks again:
# milliseconds late on an idle machine; on a loaded one the 503 and the retry each take seconds, and with 2 s
# bench/load.py --line 40 on a shared 2-core box saw 4 of 35 returning clients passed over) before whoever is
# next takes it.
RETURN_GRACE_S = 5.0
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
    due: float = 0.0  # an absent place: when its client was told to come back
    hold_until: float = math.inf  # a present place not admitted by then is told to come back (send_away)
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
        self.paces: deque[float] = deque(maxlen=PACE_WINDOW)  # seconds a run took, the last requests'
        self._line: OrderedDict[str, Place] = OrderedDict()  # waiting places, in arrival order
        self._running: list[Place] = []
        self._seq = itertools.count()

    @property
    def waiting(self) -> int:
        return len(self._line)

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def run_s(self) -> float:
        """Seconds a run takes here, as the line announces turns: the slowest of the last requests' paces."""
        return max(self.paces, default=INITIAL_RUN_S)

    def join(
        self, work: float = 1.0, ticket: str | None = None, on_admit: Callable[[], None] | None = None
    ) -> Turn:
        """A place for a request of `work` runs: the place its ticket holds if it names one still in line, else a
        new one at the end. Admitted at once when a slot is free for it (nobody ahead is present, or holds one)."""
        self._give_up_expired()
        place = self._line.get(ticket) if ticket else None
        if place is None:
            if len(self._line) + len(self._running) >= self.max_line:
                return Turn(None, len(self._line) + 1, self._turn_s(None))
            place = Place(secrets.token_urlsafe(12), next(self._seq), max(work, 0.0))
            self._line[place.id] = place
        place.present, place.expires, place.on_admit = True, math.inf, on_admit
        self._admit()
        if place.admitted:
            return Turn(place, 0, 0.0)
        if self.paces and self.wait_s(place) > self.hold_s:  # too long to hold a connection: come back
            return self.send_away(place)
        place.hold_until = self.clock() + self.hold_s
        return Turn(place, self.position(place), self.wait_s(place))

    def send_away(self, place: Place) -> Turn:
        """A present place not admitted: its client is told its turn (503, Retry-After) and comes back with its
        ticket; until then the place is absent."""
        turn = Turn(place, self.position(place), self.wait_s(place))
        if place.admitted:
            return turn
        place.present, place.on_admit = False, None
        place.due = self.clock() + turn.retry_after  # what the client is told, rounded up to whole seconds
        place.expires = place.due + CLAIM_GRACE_S
        return turn

    def leave(self, place: Place) -> None:
        """The request is done (admitted: its pace is recorded) or gone while waiting; the next in line runs."""
        if place.admitted:
            if place in self._running:
                self._running.remove(place)
                if place.work > 0:
                    self.paces.append((self.clock() - place.started) / place.work)
        else:
            self._line.pop(place.id, None)
        self._admit()

    def poll(self) -> None:
        """Time has passed: a slot held for a client past its grace goes to whoever is next (called by the
        waiting requests, which are the ones it may go to)."""
        self._give_up_expired()
        self._admit()

    def position(self, place: Place) -> int:
        """1 + the places ahead of it in line (0 once admitted)."""
        if place.admitted:
            return 0
        return 1 + sum(1 for p in self._line.values() if p.seq < place.seq)

    def pace_s(self) -> float:
        """Seconds a run takes here: the recent pace (run_s), or more while a running request has already taken
        longer a run than that."""
        now = self.clock()
        return max([self.run_s] + [(now - p.started) / p.work for p in self._running if p.work > 0])

    def wait_s(self, place: Place) -> float:
        """Estimated seconds until `place` is admitted (_turn_s)."""
        return 0.0 if place.admitted else self._turn_s(place)

    def _turn_s(self, place: Place | None) -> float:
        """Seconds until a slot is free for `place` (None: a newcomer at the end): the running requests' work left
        at the current pace, then each place before it, in line order, taking the slot that frees first (an
        absent one no sooner than its client is due back) and holding it for its work."""
        now, pace = self.clock(), self.pace_s()
        free = [now + max(0.0, p.work * pace - (now - p.started)) for p in self._running]
        free += [now] * (self.slots - len(free))
        heapq.heapify(free)
        for p in self._line.values():
            if place is not None and p.seq >= place.seq:
                break
            start = max(heapq.heappop(free), now if p.present else p.due)
            heapq.heappush(free, start + p.work * pace)
        return free[0] - now

    def _admit(self) -> None:
        """Each free slot to the first place in line without one: a present place runs; an absent one's slot
        waits for its client until its due time plus RETURN_GRACE_S, after which it is passed over."""
        now = self.clock()
        free = self.slots - len(self._running)
        for p in list(self._line.values()):
            if free <= 0:
                return
            if p.present:
                del self._line[p.id]
                p.admitted, p.started = True, now
                self._running.append(p)
                if p.on_admit is not None:
                    p.on_admit()
                free -= 1
            elif now <= p.due + RETURN_GRACE_S:
                free -= 1  # held for its client, who is due back by then

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
