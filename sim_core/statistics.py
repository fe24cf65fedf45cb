"""Means and 95% confidence intervals over seeds. One seed is one sample: a knee or a policy difference read off
a single run can be noise, so `Scenario.seeds = N` runs seeds seed .. seed + N - 1 and reports each metric's mean
with a Student-t interval."""

from __future__ import annotations

import math

# Two-sided 95% Student-t quantiles t(0.975, df) (any statistics table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2);
# between listed degrees of freedom the smaller df's value is used (a slightly wider, conservative interval).
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
         20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048,
         29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def t_975(df: int) -> float:
    if df < 1:
        raise ValueError("a confidence interval needs at least two samples")
    return T_975[max(k for k in T_975 if k <= df)] if df <= 120 else 1.960


def mean_ci95(values: list[float]) -> tuple[float, float, float]:
    """(mean, low, high) of a Student-t 95% interval for the mean."""
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, mean, mean
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_975(n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def is_number(v) -> bool:
    """A finite int or float, not a bool: a leaf that can be averaged or given an interval."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def aggregate(docs: list[dict]) -> tuple[dict, dict]:
    """Metric documents of several seeds -> (means, ci95): the same nesting, each numeric leaf averaged, and
    beside it [low, high]. A leaf that is not a number everywhere (a flag, a name, a missing value) keeps the
    first seed's value and has no interval."""
    means, ci = {}, {}
    for key, first in docs[0].items():
        values = [d.get(key) for d in docs]
        if isinstance(first, dict) and all(isinstance(v, dict) for v in values):
            means[key], sub = aggregate(values)
            if sub:
                ci[key] = sub
        elif all(is_number(v) for v in values):
            mean, low, high = mean_ci95([float(v) for v in values])
            means[key] = mean
            ci[key] = [low, high]
        else:
            means[key] = first
    return means, ci
