"""Latency under offered load (a profile's `workload.load` ladder): the curves with their
knee and SLO capacity (curves) and their table for text and Markdown (text); the
figures are reports.plots.load."""
