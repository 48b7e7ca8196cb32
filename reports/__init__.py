"""From stored runs to tables, plots and documents; never a host."""

from __future__ import annotations

if __name__ != "napilab.reports":  # `import reports` from the repository root: a second copy
    raise ImportError(f"import napilab.reports, not {__name__}: the repository's reports/ is "
                      "installed as napilab.reports (pip install -e .)")
