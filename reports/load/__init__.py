"""Latency under offered load (a profile's `workload.load` ladder): the curves with their
knee and SLO capacity (curves), their table for text and Markdown (text) and their
figures (plots)."""
