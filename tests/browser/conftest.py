"""Browser-test fixtures: a real `jupyter lab` subprocess (`tests/lab_process.py`) and headless
Debian Chromium."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..lab_process import LabServer, ServerDidNotStart, shutdown, start_lab

__all__ = ["LabServer", "copy_to_docs", "save_screenshot"]

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "tests" / "artifacts"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def jp_asyncio_loop() -> Iterator[None]:
    """Replace pytest-jupyter's autouse loop fixture (tests/conftest.py loads its plugin).

    Playwright's sync API owns the running loop here; closing it at teardown would fail.
    """
    yield None


@pytest.fixture
def jp_server_cleanup() -> Iterator[None]:
    """Replace pytest-jupyter's autouse in-process server cleanup: the server is a subprocess."""
    yield None


@pytest.fixture(scope="module")
def lab_script() -> dict[str, Any]:
    """The scripted provider's turns; override in a test module."""
    return {"turns": [{"text": "Nothing to do."}]}


@pytest.fixture(scope="module")
def lab_user_settings() -> dict[str, dict[str, Any]]:
    """JupyterLab user settings by `<package>/<plugin>`; override to add (e.g. a theme)."""
    return {
        # No news or update toasts over the UI.
        "@jupyterlab/apputils-extension/notification": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
    }


@pytest.fixture(scope="module")
def lab_server(
    tmp_path_factory: pytest.TempPathFactory,
    lab_script: dict[str, Any],
    lab_user_settings: dict[str, dict[str, Any]],
) -> Iterator[LabServer]:
    try:
        server = start_lab(tmp_path_factory.mktemp("lab"), lab_script, lab_user_settings)
    except ServerDidNotStart as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        shutdown(server)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="Python playwright is missing")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (set CHROMIUM_PATH)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            browser.close()


# Console errors JupyterLab itself logs in this setup that are harmless to what the tests
# check, as (text in the message, text in the source URL), each with the reason. Every other
# console error and every uncaught page error fails the test at teardown.
BENIGN_CONSOLE_ERRORS: list[tuple[str, str]] = [
    # JupyterLab asks "leave the page?" (beforeunload) while a document is open; a test's
    # page.reload() has no user gesture, so Chromium skips the prompt and logs this.
    ("Blocked attempt to show a 'beforeunload' confirmation panel", "/lab"),
    # With two pages on one kernel, each receives the iopub `comm_close` of comms the other
    # page's JupyterLab opened (widget manager); JupyterLab logs that it has no such comm and
    # ignores the message.
    ("Comm not found for comm id", "/static/lab/"),
]


def _is_benign(message: str, location: str, expected: list[tuple[str, str]]) -> bool:
    return any(
        text in message and where in location for text, where in [*BENIGN_CONSOLE_ERRORS, *expected]
    )


def _watch_errors(page: Any) -> list[str]:
    """Collect uncaught page errors and console errors (minus the allow-list) on `page`.

    A test that provokes an error on purpose adds `(text, url part)` to `page.expected_errors`.
    """
    errors: list[str] = []
    expected: list[tuple[str, str]] = []

    def on_console(msg: Any) -> None:
        if msg.type != "error":
            return
        location = msg.location.get("url", "") if isinstance(msg.location, dict) else ""
        if not _is_benign(msg.text, location, expected):
            errors.append(f"console error: {msg.text} ({location})")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}\n{exc.stack or ''}"))
    page.console_errors = errors
    page.expected_errors = expected
    return errors


@pytest.fixture
def new_page(browser: Any) -> Iterator[Any]:
    """Makes fresh 1400x900 pages (one browser context each); at teardown, the test fails if
    any of them had an uncaught page error or a console error (`page.console_errors`)."""
    contexts: list[Any] = []
    pages: list[Any] = []

    def make() -> Any:
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        contexts.append(context)
        page = context.new_page()
        _watch_errors(page)
        pages.append(page)
        return page

    make.pages = pages  # type: ignore[attr-defined]
    try:
        yield make
    finally:
        for context in contexts:
            context.close()
    errors = [error for page in pages for error in page.console_errors]
    if errors:
        pytest.fail("errors in the browser:\n" + "\n".join(errors[:20]), pytrace=False)


@pytest.fixture
def page(new_page: Any) -> Any:
    """A fresh page; errors in it fail the test (see `new_page`)."""
    return new_page()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """On a failure, attach the server log and the browser console errors to the report."""
    report = yield
    if report.failed and report.when in ("setup", "call"):
        funcargs = getattr(item, "funcargs", {})
        server = funcargs.get("lab_server")
        if isinstance(server, LabServer):
            report.sections.append(("jupyter lab log (tail)", server.log_tail()))
        factory = funcargs.get("new_page")
        pages = getattr(factory, "pages", [])
        errors = [error for page in pages for error in page.console_errors]
        if errors:
            report.sections.append(("browser console errors", "\n".join(errors[-50:])))
    return report


def save_screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    page.screenshot(path=str(path))
    return path


def copy_to_docs(path: Path, name: str) -> None:
    """Refresh the README screenshot only when asked (keeps `docs/` stable in CI)."""
    if os.environ.get("PAL_UPDATE_DOCS_SCREENSHOT") == "1":
        shutil.copyfile(path, REPO / "docs" / name)


def send_to_chat(chat: Any, text: str) -> None:
    """Type `text` into the chat panel's input and press Enter, as a user does."""
    chat_input = chat.get_by_test_id("pal-chat-input")
    chat_input.fill(text)
    chat_input.press("Enter")
