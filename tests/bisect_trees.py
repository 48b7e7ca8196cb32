"""What the bisect unit tests share: bzImage-shaped files (a setup header and a banner,
no kernel: what napilab reads of an image), a synthetic git tree whose build copies one
of two of them, a profile and an inventory of hosts napilab never reaches here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

OLD = "7.2.13+deb14-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian " \
      "7.2.13-1 (2026-10-28)"
NEW = "7.2.13+deb14-rt-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_RT Debian " \
      "7.2.13-1 (2026-10-28)"


def bzimage(banner: str) -> bytes:
    """A file with a bzImage's setup header ("HdrS" at 0x202) whose kernel_version
    pointer (0x20E, 0x200 bytes short) points at BANNER."""
    data = bytearray(0x1000)
    data[0x1F1] = 4
    data[0x202:0x206] = b"HdrS"
    data[0x20E:0x210] = (0x600 - 0x200).to_bytes(2, "little")
    data[0x600:0x600 + len(banner)] = banner.encode()
    return bytes(data)


ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}


def tree(tmp_path: Path, which: dict[int, str]) -> tuple[Path, dict[int, str], str]:
    """A git tree of one commit per WHICH entry (the file `which` names A, B or another
    word), the images A and B, and the build command that copies the one named (any
    other word: the build fails)."""
    images = tmp_path / "images"
    images.mkdir()
    (images / "A").write_bytes(bzimage(OLD))
    (images / "B").write_bytes(bzimage(NEW))
    (images / "junk").write_bytes(b"not a kernel\n")
    path = tmp_path / "linux"
    build = f"mkdir -p out && cp {images}/$(cat which) out/bzImage"
    return path, commit_tree(path, which), build


def commit_tree(path: Path, which: dict[int, str]) -> dict[int, str]:
    """A git tree at PATH of one commit per WHICH entry ("commit N", its file `which`
    holding the name), and each commit's sha by N."""
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    for number, name in which.items():
        (path / "which").write_text(name + "\n")
        subprocess.run(["git", "-C", str(path), "add", "which"], check=True, env=ENV)
        subprocess.run(["git", "-C", str(path), "commit", "-q", "--allow-empty", "-m",
                        f"commit {number}"],
                       check=True, env=ENV)
    shas = subprocess.run(["git", "-C", str(path), "rev-list", "--reverse", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.split()
    return dict(enumerate(shas, start=1))


PROFILE = """\
name: bisect-unit
hosts: {sender: a, receiver: b}
workload: {tool: ping, duration: 1, client: {role: sender}, server: {role: receiver}}
collect:
  interrupts: {roles: [receiver], cpus: "1"}
variants:
  rps: {setup: {receiver: {rps: {eth0: "1"}}}}
metrics:
  interrupts.function_call_interrupts: {direction: lower}
repeat: 2
"""

INVENTORY = """\
hosts:
  a: {address: 192.0.2.1}
  b: {address: 192.0.2.2, boot: {method: kexec}}
"""


def profile_and_inventory(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "p.yaml").write_text(PROFILE)
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    return tmp_path / "p.yaml", tmp_path / "inv.yaml"
