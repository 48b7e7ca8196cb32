"""The trace collector: per-stage latency histograms of the receive path from kernel
tracepoints (trace.py), its bpftrace stages (program.py, stages/*.bt) and their
log-linear histograms (histogram.py)."""
