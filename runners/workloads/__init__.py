"""Workload tools (ping, iperf3, sockperf, neper, netperf, any command): one
module per tool, each a command builder and a pure parser."""
