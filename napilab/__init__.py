"""napilab, as installed: its three packages under one name (napilab.harness, the
foundation and the CLI; napilab.runners, the workload and collector parsers;
napilab.reports, the reports). The repository keeps them as top-level folders; the
entries here are symlinks to them, so the source tree imports what the wheel installs."""
