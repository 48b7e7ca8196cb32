"""The statistics behind every verdict: pure, numpy and scipy only, no I/O."""
