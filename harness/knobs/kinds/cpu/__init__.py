"""The host's CPU and power knob kinds: frequency (cpufreq, intel_pstate,
energy_perf_bias, platform_profile), idle states (cpuidle, cpu_dma_latency), SMT and
transparent hugepages."""
