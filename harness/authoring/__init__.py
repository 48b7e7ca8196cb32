"""Help for people writing profiles: the JSON Schema editors read (`napilab schema`) and
the starter files `napilab init` writes. No host is touched here."""
