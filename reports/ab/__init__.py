"""The A/B table: lines, cells and comparisons from stored data, within one run or
across runs, the verdicts and directions behind them, and its JSON form."""
