"""The inventory: which hosts a profile's roles run on and how to reach them (napilab's
YAML, Ansible INI, `--list` JSON and group_vars/). No host is touched here."""
