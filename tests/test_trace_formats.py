"""The trace formats (sim_core/trace_formats): each reader parses its bundled real sample or, where none could be
fetched, rows written as its format's documentation describes them; the format is told by the first line; bad rows
are named by line and field (fuzzed: nothing but a TraceError escapes); block hashes become prefix content that the
prefix cache finds as the trace's own reuse; and the fields the engine cannot replay yet are kept."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim_core import Scenario, ScenarioError, parse_scenario, run
from sim_core.kernel.content_hash import content_hashes
from sim_core.trace_formats import FORMATS, ParsedTrace, detect_format, read_trace_records
from sim_core.traces import BUNDLED_TRACE_DIR, BUNDLED_TRACES, TraceError, read_trace_file_records, trace_path
from sim_core.workload import TRACE_BLOCK_SEGMENT, UNIQUE, Requests

SAMPLES = {
    "burstgpt-1-first400": "burstgpt",
    "mooncake-conversation-first200": "mooncake",
    "azure-code-2023-first200": "azure",
    "weka-cc-trace-0291": "weka",
}


def parse(text: str, fmt: str | None = None, block_tokens: int | None = None):
    return read_trace_records(text, 10_000, fmt, block_tokens)


def error_of(text: str, fmt: str | None = None) -> str:
    with pytest.raises(TraceError) as caught:
        parse(text, fmt)
    return str(caught.value)


def sample_first_line(name: str) -> str:
    with open(trace_path(name), encoding="utf-8") as f:
        return f.readline(1 << 20)


def test_every_bundled_sample_has_a_format_here():
    assert set(SAMPLES) == set(BUNDLED_TRACES)


@pytest.mark.parametrize("name, fmt", SAMPLES.items())
def test_each_bundled_sample_is_detected_and_keeps_the_fields_its_format_lists(name, fmt):
    assert detect_format(sample_first_line(name)) == fmt
    parsed = read_trace_file_records(name, 10_000)
    assert set(parsed.fields) == set(FORMATS[fmt].fields)
    assert len(parsed.requests) > 10 and parsed.requests.arrival_s[0] == 0
    assert np.all(np.diff(parsed.requests.arrival_s) >= 0)
    assert all(len(v) == len(parsed.requests) for v in parsed.fields.values())


def test_the_mooncake_sample_reads_as_its_rows_say():
    rows = [json.loads(line) for line in open(trace_path("mooncake-conversation-first200"), encoding="utf-8")]
    parsed = read_trace_file_records("mooncake-conversation-first200", 10_000)
    assert parsed.requests.prompt_tokens.tolist() == [
        r["input_length"] for r in rows
    ]  # already in time order
    assert parsed.requests.arrival_s.tolist() == pytest.approx([r["timestamp"] / 1e3 for r in rows])
    assert parsed.block_tokens == 512


def test_the_azure_sample_reads_its_columns():
    lines = open(trace_path("azure-code-2023-first200"), encoding="utf-8").read().splitlines()[1:]
    parsed = read_trace_file_records("azure-code-2023-first200", 10_000)
    assert sorted(parsed.requests.prompt_tokens.tolist()) == sorted(int(x.split(",")[1]) for x in lines)
    assert parsed.requests.arrival_s[-1] == pytest.approx(199.0896, abs=1e-3)  # 18:17:03.98 to 18:20:23.07
    assert np.all(parsed.fields["images"] == -1)  # the 2023 trace records no images


def test_the_weka_sample_flattens_its_subagents_into_the_session():
    raw = json.loads(open(trace_path("weka-cc-trace-0291"), encoding="utf-8").read())
    parsed = read_trace_file_records("weka-cc-trace-0291", 10_000)
    f, reqs = parsed.fields, parsed.requests
    markers = [r for r in raw["requests"] if r["type"] == "subagent"]
    assert len(reqs) == len(raw["requests"]) - len(markers) + sum(len(m["requests"]) for m in markers)
    assert parsed.block_tokens == 64 and np.all(f["session"] == 0)
    assert sorted(set(f["agent"].tolist())) == [0, 1, 2] and set(f["depth"].tolist()) == {0, 1}
    # Subagent times count from the spawn, its first request at t=0.0; the marker's t (1148.013 s) is when it
    # finished, duration_ms (46,656) after the spawn, 0.7 s after the main request that called it ended.
    first_sub = np.flatnonzero(f["agent"] == 1)[0]
    assert reqs.arrival_s[first_sub] == pytest.approx(markers[0]["t"] - markers[0]["duration_ms"] / 1e3)
    spawner = raw["requests"][15]
    assert 0 < reqs.arrival_s[first_sub] - (spawner["t"] + spawner["api_time"]) < 1
    # Its parent is the main agent's request just before the marker; the main agent's chain runs on past it.
    main = np.flatnonzero(f["agent"] == 0)
    assert f["parent"][first_sub] == main[15] and f["parent"][main[16]] == main[15]
    assert f["turn"][main].tolist() == list(range(len(main)))
    assert np.nansum(f["think_s"][main]) == pytest.approx(
        sum(r["think_time"] for r in raw["requests"] if r["type"] == "n")
    )
    assert parsed.labels["model"] == ("claude-opus-4-5-20251101", "claude-haiku-4-5-20251001")
    assert f["thinking"][main[0]] == 1 and f["stop"][main[0]] == 1  # output_types has thinking; stop tool_use


# ----- block hashes become prefix content -----


def trace_own_reuse(rows: list[tuple[int, list[int]]], block: int) -> float:
    """The share of prompt tokens an infinite prefix cache serves, from the trace's hash ids alone: a request's
    blocks hit while the ids so far are a prefix some earlier request listed."""
    seen, hit, total = set(), 0, 0
    for prompt, ids in rows:
        total += prompt
        key, matched = (), True
        for k, h in enumerate(ids):
            key += (h,)
            matched = matched and key in seen
            hit += min(block, prompt - k * block) if matched else 0
            seen.add(key)
    return hit / total


def simulated_reuse(parsed, block: int) -> float:
    """The same share from the simulator's content hashes at block size `block` (full blocks only)."""
    reqs = parsed.requests
    hashes, off = content_hashes(*reqs.content(), block)
    seen, hit = set(), 0
    for i in range(len(reqs)):
        own = hashes[off[i] : off[i] + reqs.prompt_tokens[i] // block].tolist()
        k = 0
        while k < len(own) and own[k] in seen:
            k += 1
        hit += k * block
        seen.update(own)
    return hit / reqs.prompt_tokens.sum()


def _bailian_rows(n: int = 300, seed: int = 5) -> list[dict]:
    """Qwen-Bailian rows as its README specifies: sessions whose turns carry the conversation so far (ids of
    16-token blocks, the last partial), some a shared system prompt, ids hashed per block (not chained)."""
    rng = np.random.default_rng(seed)
    rows, sessions, next_id = [], [], 1000
    for chat_id in range(n):
        if sessions and rng.random() < 0.6:
            parent = sessions[rng.integers(len(sessions))]
            grow = int(rng.integers(20, 400))
            ids = parent["hash_ids"][: parent["input_length"] // 16] + list(
                range(next_id, next_id + -(-grow // 16))
            )
            length = parent["input_length"] // 16 * 16 + grow
            row = {"chat_id": chat_id, "parent_chat_id": parent["chat_id"], "turn": parent["turn"] + 1}
        else:
            length = int(rng.integers(100, 3000))
            ids = [1, 2, 3] + list(range(next_id, next_id + -(-(length - 48) // 16)))
            row = {"chat_id": chat_id, "parent_chat_id": -1, "turn": 1}
        next_id += len(ids)
        row.update(
            timestamp=round(chat_id * 0.37, 3),
            input_length=length,
            output_length=int(rng.integers(1, 500)),
            type=["text", "search", "image", "file"][chat_id % 4],
            hash_ids=ids,
        )
        rows.append(row)
        sessions.append(row)
    return rows


@pytest.mark.parametrize("name, block", [("mooncake-conversation-first200", 512), ("weka-cc-trace-0291", 64)])
def test_prefix_hits_from_the_hashes_match_the_traces_own_reuse(name, block):
    parsed = read_trace_file_records(name, 10_000)
    text = open(trace_path(name), encoding="utf-8").read()
    if name.startswith("weka"):
        raw = json.loads(text)
        flat = [r for x in raw["requests"] for r in (x["requests"] if x["type"] == "subagent" else [x])]
        order = np.argsort(parsed.requests.arrival_s, kind="stable")  # same flattening order as the reader's
        rows = [(r["in"], r["hash_ids"]) for r in flat]
        rows = [rows[i] for i in np.argsort([_abs_t(raw, r) for r in flat], kind="stable")]
        assert len(order) == len(rows)
    else:
        rows = [(r["input_length"], r["hash_ids"]) for r in map(json.loads, text.splitlines())]
    own = trace_own_reuse(rows, block)
    assert own > 0.05
    assert simulated_reuse(parsed, block) == pytest.approx(own, rel=0.05)
    # At the engine's block size (16, vLLM's) the shared blocks are still found: no block splits shared content.
    assert simulated_reuse(parsed, 16) == pytest.approx(own, rel=0.05)


def _abs_t(raw: dict, req: dict) -> float:
    for x in raw["requests"]:
        if x["type"] == "subagent" and any(r is req for r in x["requests"]):
            return x["t"] - x["duration_ms"] / 1e3 + req["t"]  # the marker's t is when the subagent finished
    return req["t"]


def test_bailian_per_block_ids_give_its_reuse_at_16_token_blocks():
    rows = _bailian_rows()
    parsed = parse("\n".join(json.dumps(r) for r in rows))
    assert parsed.block_tokens == 16 and len(parsed.requests) == len(rows)
    own = trace_own_reuse([(r["input_length"], r["hash_ids"]) for r in rows], 16)
    assert own > 0.3
    assert simulated_reuse(parsed, 16) == pytest.approx(own, rel=0.05)
    assert parsed.fields["parent_chat_id"].tolist() == [r["parent_chat_id"] for r in rows]
    assert parsed.labels["type"] == ("text", "search", "image", "file")


def test_mooncake_blocks_take_the_size_they_are_given():
    def segments(ids: list[int], block: int) -> list[int]:
        line = json.dumps({"timestamp": 0, "input_length": 300, "output_length": 5, "hash_ids": ids})
        return parse(line, block_tokens=block).requests.seg_lens.tolist()

    assert segments([7, 3, 9], 512) == [300, 5]  # the one block, partial
    assert segments([7, 3, 9], 128) == [128, 128, 44, 5]
    assert segments([7, 3, 9], 64) == [64, 64, 64, 108, 5]  # the text past the listed blocks is its own
    assert segments([7, 8, 9], 64) == [192, 108, 5]  # a run of consecutive ids is one segment


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 6), st.lists(st.integers(0, 12), max_size=8), st.integers(1, 200)),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from([16, 48, 64, 100]),
)
def test_runs_of_ids_give_the_same_cache_hits_as_one_segment_a_block(rows, engine_block):
    """Requests sharing prefixes of a pool of id lists (ids counting up, as Mooncake's and Weka's do, with
    jumps): merging runs of consecutive ids into one segment finds exactly the hits one segment a block finds."""
    pool = [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [0, 1, 2, 9, 10, 11],
        [0, 1, 20, 21, 22, 3],
        [30, 31, 32, 33, 34, 35, 36],
    ]
    lines, rows_ids = [], []
    for k, (which, tail, extra) in enumerate(rows):
        ids = pool[which % len(pool)][: 1 + which] + tail
        rows_ids.append((ids, 64 * len(ids) + extra % 64))
        lines.append(
            json.dumps({"timestamp": k, "input_length": rows_ids[-1][1], "output_length": 3, "hash_ids": ids})
        )
    merged = parse("\n".join(lines), "mooncake", 64)
    ids, lens, off = [], [], [0]
    for i, (row_ids, prompt) in enumerate(rows_ids):
        ids += [TRACE_BLOCK_SEGMENT + h for h in row_ids] + [UNIQUE + 2 * i, UNIQUE + 2 * i + 1]
        lens += [64] * len(row_ids) + [prompt - 64 * len(row_ids), 3]
        off.append(len(ids))
    keep = np.array(lens) > 0
    per_block = Requests(
        merged.requests.arrival_s,
        merged.requests.prompt_tokens,
        merged.requests.output_tokens,
        merged.requests.request_class,
        ("trace",),
        None,
        None,
        np.array(ids)[keep],
        np.array(lens)[keep],
        np.concatenate([[0], np.cumsum(np.add.reduceat(keep, off[:-1]))]),
    )
    assert simulated_reuse(merged, engine_block) == simulated_reuse(ParsedTrace(per_block), engine_block)


def test_block_tokens_for_a_format_without_hashes_is_refused():
    assert "trace_block_tokens" in error_of_with_block("arrival_s,prompt_tokens,output_tokens\n0,5,5\n")
    assert "trace_format must be one of" in error_of("0,5,5", "nope")


def error_of_with_block(text: str) -> str:
    with pytest.raises(TraceError) as caught:
        parse(text, block_tokens=16)
    return str(caught.value)


def test_weka_local_ids_are_kept_apart_between_sessions_and_global_ones_shared():
    def session(scope: str, sid: str) -> str:
        return json.dumps(
            {
                "id": sid,
                "models": ["m"],
                "block_size": 64,
                "hash_id_scope": scope,
                "requests": [{"t": 0, "type": "n", "model": "m", "in": 128, "out": 4, "hash_ids": [1, 2]}],
            }
        )

    for scope, shared in (("local", 0.0), ("global", 0.5)):
        parsed = parse(session(scope, "a") + "\n" + session(scope, "b"))
        assert simulated_reuse(parsed, 64) == pytest.approx(shared)
        assert parsed.fields["session"].tolist() == [0, 1]


def test_weka_subagent_times_already_counted_from_the_session_start_stay_as_they_are():
    trace = {
        "id": "x",
        "models": ["m"],
        "block_size": 16,
        "hash_id_scope": "global",
        "requests": [
            {"t": 0.0, "type": "s", "model": "m", "in": 32, "out": 8, "hash_ids": [1, 2], "ttft": 0.5},
            {
                "t": 2.0,
                "type": "subagent",
                "agent_id": "a",
                "subagent_type": "Explore",
                "status": "completed",
                "models": ["m"],
                "requests": [{"t": 2.5, "type": "n", "model": "m", "in": 16, "out": 3}],
            },
        ],
    }
    parsed = parse(json.dumps(trace))
    assert parsed.requests.arrival_s.tolist() == [0.0, 2.5]
    assert parsed.fields["ttft_s"][0] == 0.5 and np.isnan(parsed.fields["ttft_s"][1])


# ----- the scenario field -----


def test_trace_format_is_a_scenario_field_with_the_registrys_choices():
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({"trace": "x.jsonl", "trace_format": "parquet"})
    assert "trace_format" in str(caught.value) and "weka" in str(caught.value)
    with pytest.raises(ScenarioError, match="trace_block_tokens"):
        parse_scenario({"trace": "x.jsonl", "trace_block_tokens": 0})


def test_a_weka_session_replays_with_the_prefix_cache_hitting_its_own_reuse():
    """The engine's prefix cache, at its own 16-token blocks, serves the share of the prompts the trace's 64-token
    hashes say was seen before (89.7%: the README's figure), within 5%."""
    scenario = Scenario(
        trace="weka-cc-trace-0291",
        trace_format="weka",
        hardware="h100",
        tp=4,
        model="llama-3.3-70b",
        scheduler="chunked",
        prefix_cache="on",
    )
    metrics = run(scenario).metrics
    parsed = read_trace_file_records("weka-cc-trace-0291", 10_000)
    assert metrics["completed"] == len(parsed.requests)
    assert metrics["prefix_cache_hit_rate"] == pytest.approx(simulated_reuse(parsed, 64), rel=0.05)


def test_bundled_trace_files_are_under_their_size_cap():
    for name in BUNDLED_TRACES:
        assert (BUNDLED_TRACE_DIR / BUNDLED_TRACES[name]).stat().st_size < 200_000


def test_the_usage_docs_table_lists_every_format_with_the_fields_it_keeps():
    usage = (BUNDLED_TRACE_DIR.parents[2] / "docs" / "USAGE.md").read_text(encoding="utf-8")
    for name, fmt in FORMATS.items():
        row = next(line for line in usage.splitlines() if line.startswith(f"| `{name}` |"))
        assert all(f"`{field}`" in row.split("|")[-2] for field in fmt.fields), (name, row)


def test_sorting_sessions_that_start_together_keeps_each_requests_segments():
    """Two copies of the Weka session interleave when sorted by arrival; each request keeps its own segments."""
    text = open(trace_path("weka-cc-trace-0291"), encoding="utf-8").read()
    one = parse(text).requests
    two = parse(text + "\n" + text.replace('"trace_0291"', '"again"')).requests
    assert len(two) == 2 * len(one)
    for i in range(len(one)):
        mine = one.seg_lens[one.seg_off[i] : one.seg_off[i + 1]].tolist()
        for j in (2 * i, 2 * i + 1):
            assert two.seg_lens[two.seg_off[j] : two.seg_off[j + 1]].tolist() == mine
            assert two.prompt_tokens[j] == one.prompt_tokens[i]
