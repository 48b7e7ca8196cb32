"""Knob kinds: one class per kind of host setting (harness.knobs.kind), one module per
kind (harness.knobs.kinds), one registry in apply order (harness.knobs.registry)."""
