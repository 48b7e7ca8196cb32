"""One module per knob kind (docs/profiles.md has every key with an example)."""
