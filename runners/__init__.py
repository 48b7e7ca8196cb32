"""What runs on hosts and how to read it: workload tools and collectors, pure parsers."""

from __future__ import annotations

if __name__ != "napilab.runners":  # `import runners` from the repository root: a second copy
    raise ImportError(f"import napilab.runners, not {__name__}: the repository's runners/ is "
                      "installed as napilab.runners (pip install -e .)")
