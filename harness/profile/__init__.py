"""YAML in, frozen Plan out: profiles, inventories, knob kinds as a profile names them,
and the plan that binds a profile to an inventory. No host is touched here."""
