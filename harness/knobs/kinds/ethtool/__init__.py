"""The `ethtool` knob kind (ethtool) and its parts: the groups' grammar (grammar), what
`ethtool` shows and how it is read back (show), ntuple rules (ntuple)."""
