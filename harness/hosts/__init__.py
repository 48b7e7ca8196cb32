"""What napilab does to and learns from a host: knob backends and their resolution,
settings apply/restore with the on-host journal, the run lock, host facts,
`napilab hosts check`, the local testbed, and the scripts copied to hosts."""
