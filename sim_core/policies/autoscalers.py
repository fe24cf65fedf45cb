"""The autoscalers' registry and settings' codes: each policy's name, code and what it does, the metrics it may
scale on, and the HPA's defaults, apart from the kernels that decide (autoscaling.py), so that the scenario's
choices and the CLI's help read them without loading the engine."""

from ..prometheus_names import spec as metric_spec

SCALE_UTILIZATION, SCALE_PREDICTIVE = range(2)
AUTOSCALERS = {  # name -> (code, what it does)
    "utilization": (SCALE_UTILIZATION, "HPA/KEDA on a vLLM metric: replicas x mean metric / target, with a "
                                       "scale-down cooldown"),
    "predictive": (SCALE_PREDICTIVE, "Dynamo-planner style: the rate forecast over the next window over what one "
                                     "replica serves within the SLO"),
}
AUTOSCALER_NAMES = tuple(AUTOSCALERS)
METRIC_WAITING, METRIC_RUNNING, METRIC_KV_USAGE = range(3)
# name -> (code, vLLM's Prometheus metric, named in prometheus_names.py). Only running has a default target
# (scaling_settings: the requests one replica holds at the rate it serves within the SLO, by Little's law); waiting
# and kv_usage need one given.
SCALING_METRICS = {name: (code, metric_spec("vllm", name).name)
                   for name, code in (("waiting", METRIC_WAITING), ("running", METRIC_RUNNING),
                                      ("kv_usage", METRIC_KV_USAGE))}
METRIC_NAMES = tuple(SCALING_METRICS)
# The HPA leaves the replica count alone while the metric is within this fraction of its target.
HPA_TOLERANCE = 0.1
# Defaults, from sim_core/data/startup.json: the HPA controller's sync period (15 s) and its scale-down
# stabilisation window (300 s, also KEDA's cooldownPeriod).
DEFAULT_INTERVAL_S = 15.0
DEFAULT_COOLDOWN_S = 300.0
