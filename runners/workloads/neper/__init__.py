"""neper (tcp_rr, tcp_crr, udp_rr, tcp_stream): the tool (neper), its flags and the
client flags copied to the server (options), its `--all-samples` CSV (samples)."""
