"""YAML in, frozen Plan out: profiles, their sections and `setup:` knobs, variants and
matrices, and the plan that binds a profile to an inventory (harness.inventory). No host
is touched here."""
