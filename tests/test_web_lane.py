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


def test_the_wait_is_the_work_ahead_at_the_recent_pace_over_the_slots(clock):
    line = FairLine(slots=2, max_line=50, hold_s=1e9, clock=clock)
    line.join(work=4)
    b = line.join(work=2).place  # both running
    clock.now += 3.0
    line.leave(b)  # 2 runs in 3 s: 1.5 s a run; the average moves a fifth of the way from 1 s
    assert line.run_s == pytest.approx(1.0 + lane.PACE_WEIGHT * 0.5)
    c = line.join(work=1).place  # runs at once: a slot was free
    third = line.join(work=3)
    run_s = line.run_s
    left_a = 4 - 3.0 / run_s  # a's runs not yet done at the recent pace
    assert third.position == 1
    assert third.wait_s == pytest.approx((left_a + 1) * run_s / 2)
    assert third.retry_after == max(1, -(-third.wait_s // 1))
    assert c.admitted


def test_a_running_request_slower_than_the_average_slows_the_estimate(clock):
    line = FairLine(slots=1, max_line=50, hold_s=1e9, clock=clock)
    line.join(work=2)
    clock.now += 10.0  # 5 s a run so far, five times the average before anything finished
    waiting = line.join(work=1)
    assert line.pace_s() == pytest.approx(5.0)
    assert waiting.wait_s == 0.0 and waiting.retry_after == 1  # the running one is due at that pace
    behind = line.join(work=1)
    assert behind.wait_s == pytest.approx(
        (0 + 1) * 5.0
    )  # the running one has no run left at that pace; one ahead


def test_a_long_wait_answers_at_once_and_the_ticket_resumes_the_place(clock):
    """Past hold_s the client is told to come back; coming back with its ticket, it is still ahead of everyone who
    arrived after it, and newcomers meanwhile took places behind it."""
    line = FairLine(slots=1, max_line=50, hold_s=2.5, clock=clock)
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
    line = FairLine(slots=1, max_line=50, hold_s=0.5, clock=clock)
    line.join()
    away = line.join()
    assert not away.place.present
    clock.now += away.wait_s + lane.CLAIM_GRACE_S + 1
    back = line.join(ticket=away.place.id)
    assert back.place is not away.place  # a new place at the end
    assert line.waiting == 1


def test_someone_present_behind_an_absent_place_runs_meanwhile_and_the_absent_one_goes_next(clock):
    line = FairLine(slots=1, max_line=50, hold_s=1.5, clock=clock)
    first = line.join(work=2).place
    away = line.join(work=1)  # 2 s of work ahead: told to come back
    assert not away.place.present
    clock.now += 1.5
    present = line.join(work=1)  # 0.5 s left of the running one + 1 s of the absent place's: held
    assert present.place.present and present.position == 2
    line.leave(first)
    assert (
        present.place.admitted and not away.place.admitted
    )  # the free slot is not held for an absent client
    back = line.join(ticket=away.place.id)
    newcomer = line.join()
    assert back.position == 1 and newcomer.position == 2
    line.leave(present.place)
    assert away.place.admitted and not newcomer.place.admitted


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
