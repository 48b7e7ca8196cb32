"""Results stores against real servers (harness.stores, docs/stores.md): an S3 server
on loopback (moto's server, a test dependency: Debian's rclone is built without `serve
s3`), started here and stopped in teardown, and a local directory store. Runs are the
gate tests' recorded testbed runs (tests/golden/gate_runs)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli import run_cli

GATE = Path(__file__).resolve().parents[1] / "golden" / "gate_runs" / "nightly"
SECRET = "s3cr3t-never-shown-4711"
KEY_ID = "AKIANAPILABTEST0001"
MOTO = Path(sys.executable).parent / "moto_server"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_server() -> Iterator[str]:
    if not MOTO.exists():
        pytest.skip(f"no S3 server: {MOTO} is missing (pip install 'moto[server]')")
    port = _free_port()
    server = subprocess.Popen([str(MOTO), "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail("the S3 server did not start")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture()
def s3(s3_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket's URL, the credentials in the environment."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    import boto3

    bucket = f"napilab-{tmp_path.name.lower().replace('_', '-')[-40:]}"
    boto3.client("s3", endpoint_url=s3_server).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/lab"


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    copy = tmp_path / "results"
    shutil.copytree(GATE, copy)
    return copy


def _runs(results: Path) -> list[Path]:
    return sorted(p.parent for p in results.glob("demo/*/manifest.json"))


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_push_then_history_shows_the_run_and_a_second_push_uploads_nothing(
        kind: str, results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        request: pytest.FixtureRequest) -> None:
    url = str(tmp_path / "store") if kind == "local" else request.getfixturevalue("s3")
    first = _runs(results)[0]
    pushed = run_cli(capsys, "push", str(first), url)
    assert pushed.code == 0, pushed.err
    assert "(summary.json written first)" in pushed.out and (first / "summary.json").exists()
    shown = run_cli(capsys, "history", url, "--profile", "demo")
    assert shown.code == 0, shown.err
    assert "demo: 1 run(s)" in shown.out and first.name.split("-")[-1] in shown.out
    again = run_cli(capsys, "push", str(first), url)
    assert again.code == 0 and "already there" in again.out
    assert run_cli(capsys, "push", str(results), url).code == 0
    every = run_cli(capsys, "history", url, "--profile", "demo", "--format", "json")
    assert every.code == 0 and every.out.count('"run_id"') == len(_runs(results))


def test_history_over_s3_matches_the_local_directory_and_needs_no_samples(
        s3: str, results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "push", str(results), s3).code == 0
    local = run_cli(capsys, "history", str(results), "--profile", "demo")
    remote = run_cli(capsys, "history", s3, "--profile", "demo")
    assert remote.code == 0 and remote.out == local.out
    mirror = Path(os.environ["XDG_CACHE_HOME"]) / "napilab" / "stores"
    assert list(mirror.rglob("summary.json")) and not list(mirror.rglob("*.parquet"))


def test_a_partial_upload_is_not_a_run(s3: str, results: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    import boto3

    first, second = _runs(results)[:2]
    assert run_cli(capsys, "push", str(first), s3).code == 0
    bucket = s3.removeprefix("s3://").split("/")[0]
    client = boto3.client("s3")
    for path in second.rglob("*"):  # every file of the second run but its marker
        if path.is_file() and path.name != "summary.json":
            client.put_object(Bucket=bucket, Key=f"lab/demo/{second.name}/"
                              f"{path.relative_to(second).as_posix()}", Body=path.read_bytes())
    shown = run_cli(capsys, "history", s3, "--profile", "demo", "--format", "json")
    assert shown.code == 0 and shown.out.count('"run_id"') == 1
    assert second.name not in shown.out


def test_credentials_are_never_printed(s3: str, results: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    outputs = [run_cli(capsys, "push", str(_runs(results)[0]), s3),
               run_cli(capsys, "history", s3, "--profile", "demo"),
               run_cli(capsys, "history", "s3://no-such-bucket-here/x", "--profile", "demo")]
    assert outputs[-1].code == 1 and "NoSuchBucket" in outputs[-1].err
    for result in outputs:
        assert SECRET not in result.out + result.err
        assert KEY_ID not in result.out + result.err
    for path in (results / "demo").rglob("summary.json"):
        assert SECRET not in path.read_text()


@pytest.mark.parametrize(("url", "said"), [
    ("ftp://host/results", "unknown store scheme 'ftp'"),
    ("s3://A_Bucket/x", "is not an S3 bucket name"),
    ("sftp://user:hunter2@host/results", "sftp://user:***@host/results: a store URL "
                                         "holds no password"),
    ("sftp://host", "no directory"),
    ("sftp://host:99999/x", "the port is not a number"),
])
def test_a_bad_url_is_exit_2_naming_the_allowed_forms(
        url: str, said: str, results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for args in (("history", url, "--profile", "demo"), ("push", str(results), url)):
        result = run_cli(capsys, *args)
        assert result.code == 2, result
        assert said in result.err and "Traceback" not in result.err
        assert "hunter2" not in result.err + result.out
