"""napilab, as installed: its three packages under one name (napilab.harness, the
foundation and the CLI; napilab.runners, the workload and collector parsers;
napilab.reports, the reports). The repository keeps them as top-level folders; the
entries here are symlinks to them, for the wheel and for mypy (which cannot follow a
setuptools package-dir mapping in an editable install: 992 errors). In a source tree the
packages load from the folders themselves, so a traceback names harness/..., as git and
the docs do; a bare `import harness` is refused (harness/__init__.py)."""

import os as _os

_here = _os.path.dirname(_os.path.abspath(__file__))
_root = _os.path.dirname(_os.path.realpath(_here))
if all(_os.path.islink(_os.path.join(_here, p)) for p in ("harness", "runners", "reports")):
    __path__ = [_root]  # a source tree: napilab.harness is ROOT/harness, not the link
