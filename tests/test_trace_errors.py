"""Every malformed trace is a TraceError naming the line and the field, quoting what it found escaped and short;
and no input at all makes a reader raise anything else (fuzzed)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim_core.quoting import QUOTE_CHARS
from sim_core.traces import (
    AZURE_COLUMNS,
    BURSTGPT_COLUMNS,
    TRACE_COLUMNS,
    TraceError,
    read_azure_trace,
    read_burstgpt_trace,
    read_csv_trace,
    read_mooncake_trace,
    read_trace,
)

ROW = {"timestamp": 1, "input_length": 5, "output_length": 5}


def mooncake(**fields) -> str:
    return json.dumps({**ROW, **fields}, allow_nan=True)


def error_of(text: str, reader=read_trace) -> str:
    with pytest.raises(TraceError) as caught:
        reader(text, 100)
    return str(caught.value)


@pytest.mark.parametrize("line, words", [
    (mooncake(timestamp=float("nan")), ["line 1", "timestamp", "NaN"]),
    (mooncake(input_length=float("inf")), ["line 1", "input_length", "Infinity"]),
    (mooncake(timestamp=float("-inf")), ["line 1", "timestamp", "-Infinity"]),
    ('{"timestamp": 1, "input_length": %s, "output_length": 5}' % ("9" * 400), ["line 1", "input_length", "…"]),
    ('{"timestamp": %s, "input_length": 5, "output_length": 5}' % ("9" * 5000), ["line 1", "timestamp", "…"]),
    (mooncake(timestamp=1e300), ["line 1", "timestamp", "1e+300"]),
    ('{"timestamp": 1e400, "input_length": 5, "output_length": 5}', ["line 1", "timestamp", "1e400"]),
    (mooncake(hash_ids=[1, 2**63]), ["line 1", "hash_ids", "item 1", str(2**63)]),
    (mooncake(hash_ids=[2**40]), ["line 1", "hash_ids", "item 0"]),
    (mooncake(hash_ids=[True]), ["line 1", "hash_ids", "item 0"]),
    (mooncake(output_length="5"), ["line 1", "output_length", "'5'"]),
    ("\n" + mooncake() + "\n" + "[" * 2000, ["line 3", "nested too deeply"]),
    (mooncake(hash_ids="[" * 2000), ["line 1", "hash_ids"]),
    (mooncake() + "\n[1]", ["line 2", "expected a JSON object", "a list of 1"]),
])
def test_mooncake_rows_out_of_range_name_line_and_field(line, words):
    message = error_of(line)
    for w in words:
        assert w in message, message
    assert len(message) < 250


def test_a_deeply_nested_mooncake_value_is_refused_as_such():
    assert "nested too deeply" in error_of(mooncake(extra=None).replace("null", "[" * 2000 + "]" * 2000))


def test_blank_lines_are_tolerated_in_every_format():
    azure = "\n\n" + ",".join(AZURE_COLUMNS) + "\n\n2023-11-16 18:15:46.5,100,10\n\n"
    ours = "\n \n" + ",".join(TRACE_COLUMNS) + "\n\n0,5,5\n\n1,5,5\n"
    assert len(read_trace(azure, 10)) == 1 and len(read_azure_trace(azure, 10)) == 1
    assert len(read_trace(ours, 10)) == 2 and len(read_csv_trace(ours, 10)) == 2
    assert len(read_trace("\n\n" + mooncake() + "\n\n" + mooncake() + "\n", 10)) == 2


def test_line_numbers_count_blank_lines():
    assert error_of("\n" + ",".join(TRACE_COLUMNS) + "\n\n0,5,x\n").startswith("line 4: output_tokens")


def test_quoted_input_is_escaped_and_cut_short():
    cell = "\x1b[2J\x00" + "y" * 10_000
    message = error_of(",".join(TRACE_COLUMNS) + f"\n0,{cell},5\n")
    assert message.startswith("line 2: prompt_tokens")
    assert "\x1b" not in message and "\x00" not in message and "\\x1b[2J\\x00" in message
    assert message.endswith("…") and len(message) < 100 + QUOTE_CHARS
    header = error_of("\x07" + "z" * 10_000 + "\n1,2,3\n")
    assert "\x07" not in header and "\\x07" in header and len(header) < 200 + QUOTE_CHARS


@pytest.mark.parametrize("text, words", [
    (",".join(TRACE_COLUMNS) + "\n0," + "1" * 5000 + ",5\n", ["line 2", "prompt_tokens", "…"]),
    (",".join(TRACE_COLUMNS) + "\n1e11,5,5\n", ["line 2", "arrival_s", "1e+10"]),
    (",".join(TRACE_COLUMNS) + '\n"' + "x" * 200_000 + '",5,5\n', ["line 2", "not readable as CSV"]),
    (",".join(AZURE_COLUMNS) + "\n2023-11-16 18:15:46,5,NaN\n", ["line 2", "GeneratedTokens", "'NaN'"]),
    ("\n" + ",".join(AZURE_COLUMNS) + "\n\x00,5,5\n", ["line 3"]),
])
def test_csv_cells_out_of_range_name_line_and_field(text, words):
    message = error_of(text)
    for w in words:
        assert w in message, message


# ----- fuzzing: anything at all is read or refused with a TraceError -----
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_READER_EXAMPLES", "300"))  # per reader; bench/fuzz.py runs more
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
                         st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "9" * 400]))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
MOONCAKE_FIELDS = st.fixed_dictionaries({}, optional={
    "timestamp": JSON_VALUES, "input_length": JSON_VALUES, "output_length": JSON_VALUES, "hash_ids": JSON_VALUES})
CELLS = st.one_of(st.text(max_size=12), st.integers().map(str), st.floats().map(str),
                  st.sampled_from(["", " ", "nan", "inf", "-0", "1e400", "2023-11-16 18:15:46.68", "\x00", "\"", "9" * 5000]))


def _jsonl(rows: list[dict]) -> str:
    # Our own NaN/Infinity and long numbers are spliced in as the bare tokens a file would hold.
    return "\n".join(json.dumps(r, allow_nan=True).replace('"NaN"', "NaN").replace('"1e400"', "1e400")
                     .replace(f'"{"9" * 400}"', "9" * 400) for r in rows)


def _csv(header: tuple[str, ...], rows: list[list[str]]) -> str:
    return "\n".join([",".join(header), *(",".join(r) for r in rows)])


ANY_TEXT = st.one_of(st.text(max_size=400), st.binary(max_size=400).map(lambda b: b.decode("utf-8", "replace")),
                     st.binary(max_size=400).map(lambda b: b.decode("utf-8", "surrogateescape")))
SHAPED = {
    read_mooncake_trace: st.lists(MOONCAKE_FIELDS, max_size=4).map(_jsonl),
    read_azure_trace: st.lists(st.lists(CELLS, max_size=4), max_size=4).map(lambda r: _csv(AZURE_COLUMNS, r)),
    read_csv_trace: st.lists(st.lists(CELLS, max_size=4), max_size=4).map(lambda r: _csv(TRACE_COLUMNS, r)),
    read_burstgpt_trace: st.lists(st.lists(CELLS, max_size=4), max_size=4).map(lambda r: _csv(BURSTGPT_COLUMNS, r)),
}
SHAPED[read_trace] = st.one_of(*SHAPED.values())


@pytest.mark.parametrize("reader", list(SHAPED), ids=lambda r: r.__name__)
def test_fuzzed_input_only_ever_raises_trace_error(reader):
    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(text=st.one_of(ANY_TEXT, SHAPED[reader]))
    def reads_or_refuses(text):
        cases.append(text)
        try:
            reqs = reader(text, 50)
        except TraceError as e:
            assert str(e).isprintable() and len(str(e)) < 300 + QUOTE_CHARS
            return
        assert 1 <= len(reqs) <= 50 and reqs.arrival_s.min() == 0.0

    cases: list[str] = []
    reads_or_refuses()
    print(f"{reader.__name__}: {len(cases)} fuzzed inputs")  # shown with pytest -s
