"""Records' fields in kernels (sim_core/kernel/record_type.py): any kernel reads any field and writes number fields;
only a kernel with reference counting (allocating_kernel) may replace an array field."""

from __future__ import annotations

import numpy as np
import pytest
from numba import config as numba_config
from numba import njit, types
from numba.core.errors import NumbaError

from sim_core.kernel.state import RecordType, new_record

CLOCK = RecordType([("now", types.float64), ("steps", types.int64), ("busy", types.float64[::1])])


@njit(_nrt=True)
def _new_clock():
    c = new_record(CLOCK)
    c.now, c.steps, c.busy = 0.0, 0, np.zeros(3)
    return c


@njit(_nrt=False, no_cfunc_wrapper=True)
def _advance(c, dt):  # a kernel without NRT: number fields written in place
    c.now += dt
    c.steps += 1
    c.busy[c.steps % 3] += dt
    return c.now


@njit(_nrt=True)
def _replace_busy(c):  # with NRT: an array field may be replaced (old one released, new one kept)
    c.busy = np.ones(3)


@njit(_nrt=True)
def _drive(times, dt):
    c = _new_clock()
    for _ in range(times):
        _advance(c, dt)
    before = c.busy.copy()
    _replace_busy(c)
    return c.now, c.steps, before, c.busy


@pytest.mark.skipif(numba_config.DISABLE_JIT, reason="compiles kernels: the rule is numba's")
def test_a_kernel_without_nrt_writes_number_fields():
    now, steps, busy, replaced = _drive(4, 0.25)
    assert now == 1.0 and steps == 4 and np.array_equal(busy, [0.25, 0.5, 0.25])
    assert np.array_equal(replaced, np.ones(3))


@pytest.mark.skipif(numba_config.DISABLE_JIT, reason="compiles kernels: the rule is numba's")
def test_a_kernel_without_nrt_may_not_replace_an_array_field():
    @njit(_nrt=False, no_cfunc_wrapper=True)
    def replace_without_nrt(c):
        c.busy = c.busy[:2]

    @njit(_nrt=True)
    def drive():
        replace_without_nrt(_new_clock())

    with pytest.raises(NumbaError):
        drive()
