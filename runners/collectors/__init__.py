"""Kernel counters read around a workload (/proc, sysfs, dmesg, kprobes): one
pure parser per file or section, and the Collector adapters that snapshot them."""
