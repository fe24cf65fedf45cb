"""The simulation lane's line (app/web/lane.py, issue #37): first come, first served; a position and an honest
wait for each place; a client told to come back keeps its place with its ticket. Deterministic: a fake clock, no
threads, no timing."""

from __future__ import annotations

import pytest

from app.web import lane
from app.web.lane import FairLine


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


def paced(line: FairLine, run_s: float = 1.0) -> FairLine:
    """The line as after PACE_WINDOW requests of `run_s` a run: it announces turns at once."""
    line.paces.extend([run_s] * lane.PACE_WINDOW)
    return line


def admitted_order(line: FairLine, places: list) -> list[int]:
    """Run the line to its end, one slot's request finishing at a time: the order the places were admitted in."""
    order: list[int] = []
    running = [p for p in places if p.admitted]
    order += [places.index(p) for p in running]
    while running:
        done = running.pop(0)
        before = {id(p) for p in places if p.admitted}
        line.leave(done)
        for k, p in enumerate(places):
            if p.admitted and id(p) not in before:
                order.append(k)
                running.append(p)
    return order


def test_places_are_admitted_in_arrival_order_and_no_one_overtakes(clock):
    line = FairLine(slots=2, max_line=50, hold_s=1e9, clock=clock)
    turns = [line.join() for _ in range(12)]
    assert [t.position for t in turns] == [
        0,
        0,
        *range(1, 11),
    ]  # two run at once; the rest are numbered in line
    assert admitted_order(line, [t.place for t in turns]) == list(range(12))


def test_the_announced_position_bounds_how_many_are_admitted_first(clock):
    """Whatever order running requests finish in, places are admitted in arrival order: a place announced k-th
    has exactly the k - 1 places before it admitted first, never one from behind."""
    line = FairLine(slots=3, max_line=50, hold_s=1e9, clock=clock)
    turns = [line.join() for _ in range(10)]
    admitted: list = [t.place for t in turns if t.place.admitted]
    for step in range(10):
        running = list(line._running)
        if not running:
            break
        line.leave(running[(7 * step) % len(running)])  # finishing in a scrambled order
        admitted += [p for p in line._running if p not in admitted]
    waiting = [t for t in turns if t.position]
    assert [admitted.index(t.place) - 3 for t in waiting] == [t.position - 1 for t in waiting]


def test_the_turn_lays_the_work_ahead_on_the_slots_in_line_order_at_the_slowest_recent_pace(clock):
    line = FairLine(slots=2, max_line=50, hold_s=1e9, clock=clock)
    a = line.join(work=4).place
    b = line.join(work=2).place  # both running
    clock.now += 3.0
    line.leave(b)  # 2 runs in 3 s: 1.5 s a run
    assert line.run_s == pytest.approx(1.5)
    c = line.join(work=1).place  # runs at once: a slot was free
    third = line.join(work=3)
    # a has 4 - 3 / 1.5 = 2 runs left (3 s), c one (1.5 s): the slot c holds frees first.
    assert third.position == 1 and third.wait_s == pytest.approx(1.5)
    fourth = line.join(work=1)  # a's slot, at 3 s
    assert fourth.wait_s == pytest.approx(3.0) and fourth.retry_after == 3
    clock.now += 1.5
    line.leave(c)
    line.leave(a)  # a took 4.5 s for its 4 runs: 1.125 s a run, faster than 1.5: the slowest recent pace holds
    assert line.run_s == pytest.approx(1.5)


def test_the_pace_is_the_slowest_of_the_last_requests(clock):
    line = FairLine(slots=1, max_line=50, hold_s=1e9, clock=clock)
    for took in (2.0, 5.0, *[1.0] * (lane.PACE_WINDOW - 1)):
        place = line.join().place
        clock.now += took
        line.leave(place)
    assert line.run_s == 5.0  # still among the last PACE_WINDOW
    place = line.join().place
    clock.now += 1.0
    line.leave(place)
    assert line.run_s == 1.0


def test_a_running_request_slower_than_the_pace_slows_the_estimate(clock):
    line = FairLine(slots=1, max_line=50, hold_s=1e9, clock=clock)
    line.join(work=2)
    clock.now += 10.0  # 5 s a run so far, five times the pace before anything finished
    waiting = line.join(work=1)
    assert line.pace_s() == pytest.approx(5.0)
    assert waiting.wait_s == 0.0 and waiting.retry_after == 1  # the running one is due at that pace
    behind = line.join(work=1)
    assert behind.wait_s == pytest.approx(5.0)  # the running one has no run left at that pace; one ahead


def test_a_long_wait_answers_at_once_and_the_ticket_resumes_the_place(clock):
    """Past hold_s the client is told to come back; coming back with its ticket, it is still ahead of everyone who
    arrived after it, and newcomers meanwhile took places behind it."""
    line = paced(FairLine(slots=1, max_line=50, hold_s=2.5, clock=clock))
    running = line.join().place
    near = line.join()  # 1 s away: keeps its connection
    far = line.join()  # 2 s away... still held
    farther = line.join()  # 3 s: come back
    assert near.place.present and far.place.present and not farther.place.present
    assert farther.position == 3 and farther.retry_after == 3
    late = line.join()  # a newcomer, behind the absent place
    assert not late.place.present and late.position == 4
    line.leave(running)
    line.leave(near.place)
    line.leave(far.place)
    # The absent place is at the head but its client is away: nobody present is behind it yet but `late`, away too.
    assert line.running == 0 and line.waiting == 2
    back = line.join(ticket=farther.place.id)
    assert back.place is farther.place and back.position == 0 and farther.place.admitted
    newcomer = line.join()
    assert newcomer.position == 2  # behind `late`'s place, which is still held
    again = line.join(ticket=late.place.id)
    assert again.place is late.place and again.position == 1


def test_an_absent_place_not_claimed_in_time_is_given_up(clock):
    line = paced(FairLine(slots=1, max_line=50, hold_s=0.5, clock=clock))
    line.join()
    away = line.join()
    assert not away.place.present
    clock.now += away.wait_s + lane.CLAIM_GRACE_S + 1
    back = line.join(ticket=away.place.id)
    assert back.place is not away.place  # a new place at the end
    assert line.waiting == 1


def test_an_absent_places_slot_waits_for_its_client_until_its_announced_time(clock):
    """The announced turn is kept: when the slot frees before the client told to come back returns, nobody present
    behind it takes it; the client coming back when told is admitted at once, ahead of them."""
    line = paced(FairLine(slots=1, max_line=50, hold_s=1.5, clock=clock))
    first = line.join(work=2).place
    away = line.join(work=1)  # 2 s of work ahead: told to come back in 2 s
    assert not away.place.present and away.retry_after == 2
    clock.now += 1.5
    present = line.join(work=1)  # behind the absent place: 0.5 s left of the running one, then its 1 s
    assert present.place.present and present.position == 2 and present.wait_s == pytest.approx(1.5)
    line.leave(first)  # the slot frees at 1.5 s, before the absent client is due (2 s)
    assert not present.place.admitted and line.running == 0
    clock.now += 0.5
    back = line.join(ticket=away.place.id)
    assert back.place is away.place and back.position == 0 and away.place.admitted
    assert not present.place.admitted


def test_a_client_past_its_grace_lets_the_next_one_run_and_goes_first_when_back(clock):
    line = paced(FairLine(slots=1, max_line=50, hold_s=1.5, clock=clock))
    first = line.join(work=2).place
    away = line.join(work=1)
    clock.now += 1.5
    present = line.join(work=1)
    line.leave(first)
    clock.now += away.retry_after - 1.5 + lane.RETURN_GRACE_S + 0.1  # its client is late
    line.poll()
    assert present.place.admitted and not away.place.admitted
    back = line.join(ticket=away.place.id)
    newcomer = line.join()
    assert back.position == 1 and newcomer.position == 2
    line.leave(present.place)
    assert away.place.admitted and not newcomer.place.admitted


def test_nobody_is_admitted_before_a_place_announced_ahead_whose_client_comes_back_when_told(clock):
    """Many clients, each told to come back, returning at their Retry-After, requests finishing at the announced
    pace, newcomers arriving all the while: every request waits no longer than its first announcement, and none
    is admitted before one that took its place earlier (the position announced bounds the wait)."""
    line = FairLine(slots=2, max_line=500, hold_s=3.0, clock=clock)
    run_s, joined, admitted, due, running = 1.0, {}, {}, {}, {}
    line.paces.extend([run_s] * lane.PACE_WINDOW)
    for tick in range(4000):  # 0.1 s ticks
        now = clock.now = 1000.0 + tick / 10
        for place, end in list(running.items()):
            if end <= now + 1e-9:
                del running[place]
                line.leave(place)
        if tick < 1000 and tick % 7 == 0:  # a newcomer every 0.7 s for 100 s: more than the two slots serve
            turn = line.join(work=3)
            joined[turn.place.id] = (now, turn.place, turn.retry_after if not turn.place.present else None)
            if not turn.place.present:
                due[turn.place.id] = now + turn.retry_after
        for ticket, at in list(due.items()):
            if at <= now + 1e-9:
                del due[ticket]
                turn = line.join(ticket=ticket)
                if not turn.place.present:
                    due[ticket] = now + turn.retry_after
        line.poll()
        for ticket, (_, place, _) in joined.items():
            if place.admitted and ticket not in admitted:
                admitted[ticket] = now
                running[place] = now + place.work * run_s
    told = {t: (at, wait) for t, (at, _, wait) in joined.items() if wait is not None}
    assert len(told) > 100 and set(told) <= set(admitted)
    late = {t: admitted[t] - at - wait for t, (at, wait) in told.items() if admitted[t] - at > wait + 1e-9}
    assert late == {}
    order = sorted(admitted, key=lambda t: joined[t][0])
    assert [admitted[t] for t in order] == sorted(admitted[t] for t in order)


def test_a_cold_line_holds_a_far_place_then_tells_its_turn_at_the_running_requests_pace(clock):
    """Before any request has finished the line knows no pace: a far place is held (for hold_s, by the HTTP
    layer), then told its turn at the pace the running request shows by then; once a pace is measured, a far place
    is told at once."""
    line = FairLine(slots=1, max_line=50, hold_s=10.0, clock=clock)
    running = line.join(work=3).place
    far = [line.join(work=3) for _ in range(5)]  # 15 runs ahead at INITIAL_RUN_S: past hold_s, yet held
    assert all(t.place.present and t.place.hold_until == clock.now + 10.0 for t in far)
    clock.now += 10.0  # the running request has taken 10 s for its 3 runs, and goes on: 10 / 3 s a run at least
    told = line.send_away(far[-1].place)
    assert not told.place.present and told.position == 5
    assert told.wait_s == pytest.approx(4 * 3 * 10.0 / 3) and told.place.due == clock.now + told.retry_after
    line.leave(running)
    assert far[0].place.admitted and line.run_s == pytest.approx(10.0 / 3)
    assert not line.join(work=3).place.present  # a pace is known: told at once


def test_a_full_line_answers_without_a_place_and_the_time_to_drain(clock):
    line = FairLine(slots=2, max_line=4, hold_s=1e9, clock=clock)
    for _ in range(4):
        line.join()
    full = line.join()
    assert full.place is None and full.position == 3
    assert full.wait_s == pytest.approx((2 + 2) * line.run_s / 2)  # two running, two waiting, one run each


def test_a_gone_waiter_gives_up_its_place_and_the_next_moves_up(clock):
    line = FairLine(slots=1, max_line=50, hold_s=1e9, clock=clock)
    line.join()
    gone, next_one = line.join().place, line.join().place
    assert line.position(next_one) == 2
    line.leave(gone)
    assert line.position(next_one) == 1 and line.waiting == 1
