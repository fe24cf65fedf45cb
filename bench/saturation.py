"""Where a deployment saturates on ShareGPT-like requests: the token rate it sustains and TTFT as the offered rate
passes it. Prints figures; asserts nothing.

    .venv/bin/python bench/saturation.py                         # A100-80GB, Llama-3-8B, chunked, budget 512
    .venv/bin/python bench/saturation.py --hardware h100 --rates 20,25,30

Requests: Poisson arrivals for --duration seconds; prompt and output lengths lognormal with means ~700 and ~180
tokens (ShareGPT-like, as vLLM's serving benchmarks sample it). "Sustained" is the token rate (prompt + output
tokens computed per second of engine time) over the steps between 20 s and the end of arrivals, when the
engine has filled up and before it drains.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim_core import Scenario, run  # noqa: E402
from sim_core.kernel import state as S  # noqa: E402

MEAN_PROMPT, PROMPT_SIGMA = 700, 1.0
MEAN_OUTPUT, OUTPUT_SIGMA = 180, 0.8
WARM_S = 20.0


def sharegpt_like(rate: float, duration: float, seed: int) -> str:
    rng = np.random.default_rng(seed)
    n = int(rate * duration)
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    # lognormal with the given mean: mu = log(mean) - sigma^2 / 2
    prompt = np.clip(rng.lognormal(np.log(MEAN_PROMPT) - PROMPT_SIGMA**2 / 2, PROMPT_SIGMA, n), 4, 7000).astype(int)
    output = np.clip(rng.lognormal(np.log(MEAN_OUTPUT) - OUTPUT_SIGMA**2 / 2, OUTPUT_SIGMA, n), 2, 1200).astype(int)
    rows = "".join(f"{a:.6f},{p},{o}\n" for a, p, o in zip(arrival, prompt, output, strict=True))
    return "arrival_s,prompt_tokens,output_tokens\n" + rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hardware", default="a100")
    ap.add_argument("--model", default="llama-3-8b")
    ap.add_argument("--token-budget", type=int, default=512)
    ap.add_argument("--rates", default="8,10,12,14,16,18", help="requests/s, comma-separated")
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"{args.hardware} {args.model} chunked budget {args.token_budget}, ShareGPT-like "
          f"(~{MEAN_PROMPT} in / ~{MEAN_OUTPUT} out), {args.duration:g} s of Poisson arrivals")
    print(f"{'req/s':>6} {'offered tok/s':>13} {'sustained tok/s':>15} {'TTFT p50 ms':>11} {'ITL p50 ms':>10} "
          f"{'waiting at end':>14}")
    for rate in (float(x) for x in args.rates.split(",")):
        text = sharegpt_like(rate, args.duration, args.seed)
        s = Scenario(scheduler="chunked", hardware=args.hardware, model=args.model, token_budget=args.token_budget)
        res = run(s, trace_text=text)
        m, steps = res.metrics, res.steps
        end = float(res.requests.arrival_s.max())
        sel = (steps[:, S.S_START] > WARM_S) & (steps[:, S.S_START] < end)
        tokens = steps[sel, S.S_PREFILL_TOKENS].sum() + steps[sel, S.S_DECODE_SEQS].sum()
        sustained = tokens / steps[sel, S.S_DURATION].sum()
        offered = m["arrival_rate"] * (m["prefill_tokens"] + m["decode_tokens"]) / m["num_requests"]
        waiting = int(steps[steps[:, S.S_START] <= end][-1, S.S_WAITING])
        print(f"{rate:6g} {offered:13,.0f} {sustained:15,.0f} {m['ttft_ms']['p50']:11,.0f} "
              f"{m['itl_ms']['p50']:10.1f} {waiting:14,}")


if __name__ == "__main__":
    main()
