"""Headless Chromium (Debian's, at /usr/bin/chromium) through Playwright, for the
report and site pages. Each test gets a fresh profile directory and a page that records
every request, console message, page error and dialog; every request that is not a
file:// URL is aborted (and recorded), so a page that tried to fetch anything fails its
test without reaching the network. Skipped, saying why, when chromium or the Python
playwright package is missing (`make test` installs both)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("NAPILAB_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def why_no_browser() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "needs the playwright Python package (pip install -e '.[test]')"
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        return f"needs Debian's chromium at {CHROMIUM} (make test installs it as root)"
    return None


@dataclass
class Recorder:
    requests: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    console: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        return ([f"console {kind}: {text}" for kind, text in self.console
                 if kind in ("error", "warning")] + [f"page error: {e}" for e in self.errors]
                + [f"dialog: {d}" for d in self.dialogs]
                + [f"blocked request: {u}" for u in self.blocked])


@dataclass
class Browser:
    page: Any
    recorder: Recorder

    def open(self, path: Path) -> None:
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_load_state("load")

    def screenshot(self, name: str) -> Path:
        target = self.screenshot_path(name)
        self.page.screenshot(path=str(target), full_page=True)
        return target

    @staticmethod
    def screenshot_path(name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        return ARTIFACTS / name


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    reason = why_no_browser()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import Route, sync_playwright

    recorder = Recorder()
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=CHROMIUM, args=ARGS,
            headless=True, viewport={"width": 1280, "height": 900}, offline=True)

        def route(found: Route) -> None:
            if found.request.url.startswith("file://"):
                found.continue_()
            else:
                recorder.blocked.append(found.request.url)
                found.abort()

        context.route("**/*", route)
        context.on("request", lambda request: recorder.requests.append(request.url))
        page = context.pages[0] if context.pages else context.new_page()
        page.on("console", lambda msg: recorder.console.append((msg.type, msg.text)))
        page.on("pageerror", lambda exc: recorder.errors.append(str(exc)))

        def dialog(found: Any) -> None:
            recorder.dialogs.append(f"{found.type}: {found.message}")
            found.dismiss()

        page.on("dialog", dialog)
        try:
            yield Browser(page, recorder)
        finally:
            context.close()
