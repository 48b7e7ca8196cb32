"""Every test runs the `napilab` command line through tests/cli.py (issue 37, item 4):
run_cli in process, run_napilab / start_napilab as a subprocess. A text scan of
tests/**/*.py finds a copy of either: the CLI's entry point imported or called, click's
test runner, or the installed executable's path and an argv list that starts with it."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
HELPER = TESTS / "cli.py"

# (what it is, pattern): the escapes in each pattern's source keep it from matching
# itself, and this file is scanned like any other
COPIES = [
    ("the CLI's main called in process", re.compile(r"\b(?:cli|main)\.main\(")),
    ("the CLI's main imported to be called",
     re.compile(r"\bfrom\s+(?:napilab\.)?harness\.cli\.main\s+import\s+[^#\n]*\bmain\b")),
    ("click's test runner", re.compile(r"\bCliRunner\b")),
    ("the executable's path made again",
     re.compile(r"sys\.executable\)\.parent\s*/\s*[\"']napilab[\"']")),
    ("an argv list that starts with the executable",
     re.compile(r"\[\s*(?:NAPILAB\b|str\([^\]\n]*[\"']napilab[\"']\s*\)\s*,)")),
    ("the CLI module run with -m",
     re.compile(r"[\"']-m[\"']\s*,\s*[\"'](?:napilab\.)?harness\.cli\.main[\"']")),
    ("the executable looked up on PATH", re.compile(r"which\(\s*[\"']napilab[\"']")),
]


def written(text: str) -> str:
    """TEXT as a test would write it: in this file "@" stands for "." and "~" for
    nothing, or the file would match its own patterns."""
    return text.replace("@", ".").replace("~", "")


# Not a copy: a fresh interpreter that imports the CLI and calls its main step by step,
# to list the modules each step imports (nothing of pytest may be loaded there).
ALLOWED = {("unit/test_startup_imports.py", written("from napilab@harness.cli.main import main"))}


def copies(text: str) -> list[tuple[str, str]]:
    """(what, the line) for each way of running the CLI in TEXT."""
    found = []
    for what, pattern in COPIES:
        for match in pattern.finditer(text):
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            found.append((what, text[start:end if end >= 0 else None].strip()))
    return found


def test_only_tests_cli_runs_the_cli() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == HELPER:
            continue
        name = path.relative_to(TESTS).as_posix()
        offenders += [f"{name}: {what}: {line}" for what, line in copies(path.read_text())
                      if (name, line) not in ALLOWED]
    assert offenders == [], "run the CLI through tests/cli.py:\n" + "\n".join(offenders)


def test_the_helper_is_where_the_cli_runs() -> None:
    found = {what for what, _ in copies(HELPER.read_text())}
    assert found == {"the CLI's main imported to be called", "the executable's path made again",
                     "an argv list that starts with the executable"}


# The copies this replaced, each as it was written, and what the tests write now.
OLD = [
    "from napilab@harness.cli import main as cli\n\nwith pytest.raises(SystemExit) as exc:\n"
    "    cli@main(args)\n",
    "from napilab@harness.cli.main import main\n",
    "from napilab@harness.cli.main import cli, main\n",
    '    script = "from harness@cli.main import main; main()"\n',
    "    result = Cli~Runner().invoke(cli.cli, ['testbed', 'tools'])\n",
    'NAPILAB = str(Path(sys@executable).parent / "napilab")\n',
    "    return subprocess.run([~NAPILAB, *args], capture_output=True, text=True)\n",
    "    proc = subprocess.Popen(\n        [~NAPILAB, 'run'], stdout=subprocess.PIPE)\n",
    '    return subprocess.run([~str(self.venv / "bin" / "napilab"), *args], cwd=self.home)\n',
    '    subprocess.run([sys.executable, "-m", "napilab@harness.cli.main", "tune"])\n',
    '    exe = shutil.which(~"napilab")\n',
]
NEW = [
    "from tests.cli import NAPILAB, run_cli, run_napilab, start_napilab\n",
    "    code, out, err = run_cli(capsys, 'check', str(run))\n",
    "    done = run_napilab('run', str(profile), timeout=600, check=True)\n",
    "    proc = start_napilab(*args, stderr=subprocess.STDOUT, start_new_session=True)\n",
    '    return run_napilab(*args, executable=self.venv / "bin" / "napilab", cwd=self.home)\n',
    # the click group, for --help and the command table
    "from napilab@harness.cli import main as cli\n\ndef commands(group=cli.cli): ...\n",
    "from napilab@harness.cli.main import cli\n",
    # the executable's path for a documented shell script
    '    env = {"NAPILAB": NAPILAB, "PATH": f"{Path(NAPILAB).parent}:/usr/bin"}\n',
    '    subprocess.run(["sh", "-c", line.replace("napilab", NAPILAB, 1)])\n',
]


def test_each_old_copy_is_found_and_the_new_calls_are_not() -> None:
    for text in OLD:
        assert copies(written(text)), text
    for text in NEW:
        assert copies(written(text)) == [], text
