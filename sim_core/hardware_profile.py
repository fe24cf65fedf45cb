"""A hardware profile: the cost model's measured constants refitted on a user's own deployment
(`sched-sim calibrate`), and the two forms it travels in.

The file `sched-sim calibrate --out` writes is JSON: the deployment it was fitted on, the constants, and how well
they fit (source file, residuals). A scenario carries only what predictions need, inline, as one compact string,
so that a URL, a CLI flag and an API body share it like any other field:

    h100/llama-3-8b/fp16/tp1:compute_efficiency=0.68,bandwidth_efficiency=0.81,attention_efficiency=0.5,
    step_overhead_ms=2.4,overhead_per_seq_us=12

(one line). A profile holds for the deployment it was measured on: applying it to another GPU, model, weight
format or TP degree is refused, because the constants absorb whatever that deployment's kernels do.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, fields

from .catalog import GPUS, MODELS, QUANTIZATIONS
from .json_input import JSONInputError, loads
from .kernel.cost_constants import CONSTANT_BOUNDS, Constants
from .quoting import quote

# Marks a JSON document as a profile (and its format version), so any other JSON is refused by name.
FORMAT_KEY = "sched_sim_hardware_profile"
FORMAT_VERSION = 1
CONSTANT_NAMES = tuple(f.name for f in fields(Constants))
_DEPLOYMENT = re.compile(r"^([a-z0-9.\-]+)/([a-z0-9.\-]+)/([a-z0-9]+)/tp(\d+)$")


class ProfileError(ValueError):
    """A profile that cannot be used: the message says which part is wrong."""


@dataclass(frozen=True)
class Profile:
    """What a scenario carries: the deployment the constants were fitted on, and the constants."""

    hardware: str
    model: str
    quantization: str
    tp: int
    constants: Constants

    @property
    def deployment(self) -> str:
        return f"{self.hardware}/{self.model}/{self.quantization}/tp{self.tp}"

    def compact(self) -> str:
        """The scenario field's canonical form (parse_compact(p.compact()) == p)."""
        values = ",".join(f"{k}={number(v)}" for k, v in asdict(self.constants).items())
        return f"{self.deployment}:{values}"


def number(x: float) -> str:
    """Six significant digits: more than any fit resolves, and a fixed point of parse -> print."""
    return f"{x:.6g}"


def check_constants(values: dict) -> Constants:
    """Constants from a name -> number mapping, every one present, finite and within CONSTANT_BOUNDS."""
    missing = [k for k in CONSTANT_NAMES if k not in values]
    if missing:
        raise ProfileError(f"missing {', '.join(missing)}")
    unknown = [k for k in values if k not in CONSTANT_NAMES]
    if unknown:
        raise ProfileError(f"unknown constant {quote(unknown[0])} (known: {', '.join(CONSTANT_NAMES)})")
    out = {}
    for k in CONSTANT_NAMES:
        v = values[k]
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ProfileError(f"{k} must be a number (got {quote(v)})")
        lo, hi = CONSTANT_BOUNDS[k]
        if not (math.isfinite(v) and lo <= v <= hi and (v > 0 or lo == 0)):
            raise ProfileError(f"{k} must be between {number(lo)} and {number(hi)} (got {quote(v)})")
        out[k] = float(v)
    return Constants(**out)


def check_deployment(hardware, model, quantization, tp) -> None:
    if hardware not in GPUS:
        raise ProfileError(f"unknown hardware {quote(hardware)}")
    if model not in MODELS:
        raise ProfileError(f"unknown model {quote(model)}")
    if quantization not in QUANTIZATIONS:
        raise ProfileError(f"unknown quantization {quote(quantization)}")
    if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= 8:
        raise ProfileError(f"tp must be an integer between 1 and 8 (got {quote(tp)})")


def parse_compact(text: str) -> Profile:
    """The scenario field's string -> Profile (ProfileError saying what is wrong)."""
    head, sep, body = text.strip().partition(":")
    m = _DEPLOYMENT.match(head)
    if not sep or not m:
        raise ProfileError("must be HARDWARE/MODEL/QUANTIZATION/tpN:name=value,... as `sched-sim calibrate` "
                           "writes it (--hardware-profile takes the profile's JSON file)")
    hardware, model, quantization, tp = m.group(1), m.group(2), m.group(3), int(m.group(4))
    check_deployment(hardware, model, quantization, tp)
    values: dict[str, float] = {}
    for item in body.split(","):
        name, eq, value = item.strip().partition("=")
        if not eq:
            raise ProfileError(f"{item.strip()!r} is not name=value")
        try:
            values[name.strip()] = float(value)
        except ValueError:
            raise ProfileError(f"{name.strip()} must be a number (got {value.strip()!r})") from None
    return Profile(hardware, model, quantization, tp, check_constants(values))


def profile_constants(hardware_profile: str | None) -> Constants | None:
    """A scenario's hardware_profile field -> its constants (None, no profile: the catalog's)."""
    return None if hardware_profile is None else parse_compact(hardware_profile).constants


def canonical(hardware_profile: str | None) -> str | None:
    """The field's validator (Scenario's and StepShape's): its canonical form, or a ValueError saying what is
    wrong."""
    if hardware_profile is None:
        return None
    try:
        return parse_compact(hardware_profile).compact()  # canonical, so the query string round-trips
    except ProfileError as e:
        raise ValueError(str(e)) from None


def profile_document(profile: Profile, fit: dict) -> dict:
    """The JSON document `sched-sim calibrate --out` writes."""
    return {FORMAT_KEY: FORMAT_VERSION, "hardware": profile.hardware, "model": profile.model,
            "quantization": profile.quantization, "tp": profile.tp, "constants": asdict(profile.constants),
            "fit": fit, "scenario_field": profile.compact()}


def read_profile_document(text: str) -> Profile:
    """A profile file's text -> Profile (ProfileError naming the field that is wrong)."""
    try:
        doc = loads(text)
    except JSONInputError as e:
        raise ProfileError(f"not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get(FORMAT_KEY) != FORMAT_VERSION:
        raise ProfileError(f"not a hardware profile (no \"{FORMAT_KEY}\": {FORMAT_VERSION}; write one with "
                           f"`sched-sim calibrate --out`)")
    for key in ("hardware", "model", "quantization", "tp", "constants"):
        if key not in doc:
            raise ProfileError(f"missing field {key!r}")
    check_deployment(doc["hardware"], doc["model"], doc["quantization"], doc["tp"])
    if not isinstance(doc["constants"], dict):
        raise ProfileError("constants must be an object of name: number")
    try:
        constants = check_constants(doc["constants"])
    except ProfileError as e:
        raise ProfileError(f"constants: {e}") from None
    return Profile(doc["hardware"], doc["model"], doc["quantization"], doc["tp"], constants)


def mismatch(profile: Profile, hardware: str, model: str, quantization: str, tp: int) -> str | None:
    """Why a profile cannot apply to a deployment (None when it can)."""
    wanted = Profile(hardware, model, quantization, tp, profile.constants).deployment
    if wanted == profile.deployment:
        return None
    return (f"fitted on {profile.deployment}, not this scenario's {wanted}: a profile holds only for the "
            f"deployment it was measured on (calibrate this one, or drop the profile)")
