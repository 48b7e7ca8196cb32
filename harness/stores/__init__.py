"""Results stores (docs/stores.md): where every runner's runs are published and read
back. A directory, an SFTP server or an S3 bucket; each run under its own immutable
prefix PROFILE/RUN/, its summary.json written last as the marker of a whole run."""
