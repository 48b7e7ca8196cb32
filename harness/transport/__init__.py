"""Running commands on a host: the Transport protocol, its local and SSH
implementations (persistent shell, ~/.ssh/config) and opening one per host."""
