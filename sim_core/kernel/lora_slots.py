"""The layout of the LoRA parameter vector (cfg.lora[LP_*], built by sim_core/lora.py) and of its counters in
cfg.lora_state (LS_*), apart from the kernels that read them (lora.py): the scenario's LoRA fields load without
the engine."""

# cfg.lora[] slots.
(LP_ADAPTERS, LP_MAX_LORAS, LP_MAX_CPU_LORAS, LP_LAUNCH_S, LP_FLOPS_PER_TOKEN, LP_BYTES_PER_ADAPTER, LP_LINEAR_RATE,
 LP_STREAM_BW, LP_HOST_BW, LP_DISK_LOAD_S, LP_GROUPED, LP_AGING_S) = range(12)
N_LORA_PARAMS = 12
# cfg.lora_state[] counters after the 4 per-adapter rows.
(LS_SKIPPED, LS_LOADS_HOST, LS_LOADS_DISK, LS_LOAD_S, LS_KERNEL_S, LS_STEPS, LS_GROUPS, LS_NEXT,
 LS_MAX_GROUPS) = range(9)
N_LORA_COUNTERS = 9
