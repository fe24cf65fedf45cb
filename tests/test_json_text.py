"""sim_core/json_text.py: JSON text made column by column reads back as the values it was made from, rounded as
it says; and the A/B's every-request JSON (RequestDiff.requests_text) is request_json's entries, key for key."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim_core.json_text import number_chars, records, string_chars


def _read(chars) -> list:
    return json.loads("[" + records([chars]) + "]")


@pytest.mark.parametrize("decimals", [0, 1, 3, 4, 6, 9])
def test_numbers_read_back_rounded(decimals):
    rng = np.random.default_rng(decimals)
    x = rng.normal(0, 1, 5000) * 10.0 ** rng.integers(-8, 13, 5000)
    x[:40] = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 999.9999999999, -999.9999999999, 1000.0, 1e-12, -1e-12, 12.5,
              7.0, 100.1, 1234567.0, 0.001, 0.01, 0.1, 999.0, 1000.001, *range(-10, 10)]
    got = np.array(_read(number_chars(x, decimals)))
    assert len(got) == len(x)
    # Fixed point at `decimals` places: off by half a unit of the last place (and a double's own rounding).
    assert np.all(np.abs(got - x) <= 0.5 * 10.0 ** -decimals + 1e-15 * np.abs(x) + 1e-12)
    text = records([number_chars(x, decimals)], b" ")
    for word, value in zip(text.split(" ")[:40], x[:40], strict=True):
        assert ("." in word) == (decimals > 0), word
        if decimals:  # trailing zeros go, one fractional digit stays
            assert not word.endswith("0") or word.endswith(".0"), word
        assert not word.startswith("-") or value < 0, word
        assert word.lstrip("-")[:1] != "0" or word.lstrip("-")[1:2] in ("", "."), word  # no leading zeros


def test_special_values():
    text = records([number_chars([np.nan, np.inf, -np.inf, -0.0, -1e-12, 2.5], 3)], b",")
    assert text == "null,null,null,0.0,0.0,2.5"
    assert records([number_chars([3, 45, 1_000_000], 0)], b",") == "3,45,1000000"
    with pytest.raises(ValueError, match="too large"):
        number_chars([1e17], 3)
    with pytest.raises(ValueError, match="decimals"):
        number_chars([1.0], 10)


def test_records_lay_literals_and_columns_out_in_order():
    m = np.array([[1.5, -2.0], [0.25, 3.0]])
    values = number_chars(m, 3).reshape(2, 2, -1)
    names = string_chars(["a", 'quo"te\\'])
    text = records([b'{"x":', (values, 0), b',"name":', names, b',"y":', (values, 1), b"}"], b",\n")
    assert text == '{"x":1.5,"name":"a","y":-2.0},\n{"x":0.25,"name":"quo\\"te\\\\","y":3.0}'
    assert json.loads("[" + text + "]")[1]["name"] == 'quo"te\\'
    assert records([b"[", number_chars([], 3), b"]"]) == ""
    with pytest.raises(ValueError, match="one entry per record"):
        records([number_chars([1.0], 1), number_chars([1.0, 2.0], 1)])


def test_the_ab_json_text_is_request_json_key_for_key():
    from sim_core import Scenario
    from sim_core.request_diff import TEXT_DECIMALS, request_diff
    from sim_core.runner import run

    base = dict(workload="mixed", hardware="rtx3050", max_model_len=8192, rate=8.0, num_requests=40, seed=5)
    d = request_diff(run(Scenario(scheduler="fcfs", **base)), run(Scenario(scheduler="chunked", **base)))
    want = d.requests_json()
    for chunk in (7, 1024):  # in pieces, or in one
        got = json.loads("[" + ",".join(d.requests_texts(",", chunk)) + "]")
        assert len(got) == len(want) == len(d)

        def same(x, y):
            if isinstance(y, dict):
                assert list(x) == list(y)  # the same keys in the same order
                return all(same(x[k], y[k]) for k in y)
            if isinstance(y, str | int):
                return x == y and type(x) is type(y)
            return isinstance(x, float) and abs(x - y) <= 0.5 * 10.0 ** -TEXT_DECIMALS + 1e-12 * abs(y)
        assert all(same(g, w) for g, w in zip(got, want, strict=True))
    assert d.requests_text(",\n") == ",\n".join(d.requests_texts(",\n"))
