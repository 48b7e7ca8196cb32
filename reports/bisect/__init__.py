"""A `napilab bisect`'s step verdicts (through the nightly gate) and its reports."""
