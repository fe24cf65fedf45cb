"""Frontier points carry InferenceX's energy axes (issue #40): joules per token on the point's token basis and
tokens/s per MW, where the GPU's power is modelled, and None where it is not."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from sim_core import run
from sim_core.catalog import GPUS
from sim_core.scenario import parse_scenario
from sim_core.studies.frontier import frontier_scenario, point_metrics


def test_points_carry_joules_per_token_and_tokens_per_mw(capsys):
    code = main(
        [
            "frontier",
            "--model",
            "qwen2.5-0.5b",
            "--hardware",
            "h100,rtx3050",
            "--isl",
            "128",
            "--osl",
            "32",
            "--max-concurrency",
            "4",
            "--workers",
            "1",
            "--basis",
            "output",
            "--json",
        ]
    )
    assert code == 0
    points = json.loads(capsys.readouterr().out)["points"]
    powered = [p for p in points if p["hardware"] == "h100"]
    assert powered and all(p["hardware"] == "rtx3050" for p in points if p not in powered)
    for p in points:
        assert {"joules_per_token", "tokens_per_mw"} <= set(p)
        if p["hardware"] == "rtx3050":  # no measured idle power: no energy, said as None
            assert p["joules_per_token"] is None and p["tokens_per_mw"] is None
            continue
        assert p["tokens_per_mw"] == pytest.approx(1e6 / p["joules_per_token"])
        # J/token x tokens/s per GPU is the power per GPU: within the GPU's idle and board power
        watts = p["joules_per_token"] * p["throughput_per_gpu"]
        assert GPUS["h100"].idle_power_w < watts <= GPUS["h100"].board_power_w
    curve = sorted((p["concurrency"], p["joules_per_token"]) for p in powered if p["tp"] == 1)
    assert [j for _, j in curve] == sorted((j for _, j in curve), reverse=True)  # more users: fewer J/token


def test_the_token_basis_of_the_energy_axis_follows_the_throughput():
    """On the total basis prompt tokens count too: the same run's energy over more tokens."""
    run_metrics = run(
        frontier_scenario(
            parse_scenario(
                {"model": "llama-3.2-1b", "hardware": "l4", "workload": "random", "isl": 512, "osl": 64}
            ),
            "l4",
            4,
            2,
        )
    ).metrics
    total, output = point_metrics(run_metrics, "total"), point_metrics(run_metrics, "output")
    assert total["joules_per_token"] < output["joules_per_token"]
    assert total["joules_per_token"] * total["throughput_per_gpu"] == pytest.approx(
        output["joules_per_token"] * output["throughput_per_gpu"], rel=0.05
    )  # the same power per GPU
