"""The `napilab` command line: the one package that wires every layer together
(profile, hosts, engine, store and the reports)."""
