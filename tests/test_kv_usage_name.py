"""Issue #39's must-show: the autoscaler and the docs use `vllm:kv_cache_usage_perc`, the name vLLM exports since
0.9; the old `vllm:gpu_cache_usage_perc` appears only where the rename is stated (the reader accepts both)."""

from __future__ import annotations

from pathlib import Path

from sim_core.policies import autoscaling
from sim_core.prometheus_names import LEGACY_NAMES, METRICS

ROOT = Path(__file__).resolve().parent.parent
NEW, OLD = "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"


def test_the_exporter_and_the_autoscaler_name_kv_usage_as_vllm_does_now():
    assert {m.name for m in METRICS["vllm"] if m.concept == "kv_usage"} == {NEW}
    assert LEGACY_NAMES["vllm"]["kv_usage"] == (OLD,)  # still read, from older servers' scrapes
    assert NEW in autoscaling.__doc__


def test_the_old_name_appears_only_beside_the_new_one():
    files = [*ROOT.glob("sim_core/**/*.py"), *ROOT.glob("app/**/*.py"), *ROOT.glob("docs/*.md"), ROOT / "README.md"]
    for path in files:
        text = path.read_text(encoding="utf-8")
        for n, line in enumerate(text.splitlines(), 1):
            if OLD in line and path.name != "prometheus_names.py":
                assert NEW in line, f"{path.relative_to(ROOT)}:{n} names {OLD} without {NEW}"
    assert "kv_cache_usage_perc" in (ROOT / "docs" / "USAGE.md").read_text(encoding="utf-8")
