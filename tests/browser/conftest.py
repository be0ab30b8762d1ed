"""Browser-test fixtures: a real `jupyter lab` subprocess and headless Debian Chromium.

The server runs from a temporary root with its own config, data, runtime, settings and
workspace directories, so nothing on the machine (or a previous run) leaks in. It loads the
labextension straight from this checkout's build output (`prime_agent_lab/labextension`), so a
stale copy installed by `pip install -e` cannot shadow the code under test.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LABEXTENSION_BUILD = REPO / "prime_agent_lab" / "labextension"
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
SERVER_START_TIMEOUT = 90.0
LOG_TAIL_LINES = 150


@dataclass
class LabServer:
    """A running `jupyter lab` and the paths it uses."""

    url: str  # base URL, ending in "/"
    token: str
    root_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes]
    extra: dict[str, Any] = field(default_factory=dict)

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """Call the server's REST API with the token; returns decoded JSON (or None)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path.lstrip("/"),
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
        return json.loads(payload) if payload else None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as exc:
            return f"(no server log: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    def lab_url(self, path: str = "lab") -> str:
        return f"{self.url}{path}?token={self.token}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def _wait_until_serving(server: LabServer, deadline: float) -> None:
    """Poll until the server and the Prime Agent routes answer, or fail with the log."""
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(
                f"jupyter lab exited with {server.process.returncode} before serving.\n"
                f"--- server log ---\n{server.log_tail()}",
                pytrace=False,
            )
        try:
            server.api("GET", "api/status", timeout=2)
            server.api("GET", "prime-agent/api/info", timeout=2)
            return
        except (OSError, urllib.error.URLError) as exc:
            last_error = exc
            time.sleep(0.25)
    pytest.fail(
        f"jupyter lab did not answer within {SERVER_START_TIMEOUT:.0f}s ({last_error}).\n"
        f"--- server log ---\n{server.log_tail()}",
        pytrace=False,
    )


def _shutdown(server: LabServer) -> None:
    """Shut kernels down through the API, then end the server's process group."""
    process = server.process
    if process.poll() is None:
        with contextlib.suppress(Exception):
            for kernel in server.api("GET", "api/kernels", timeout=5):
                server.api("DELETE", f"api/kernels/{kernel['id']}", timeout=10)
    for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)


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
    if not (LABEXTENSION_BUILD / "package.json").exists():
        pytest.fail(
            f"The labextension is not built ({LABEXTENSION_BUILD} is missing): "
            "run `cd labextension && jlpm install && jlpm build:prod`.",
            pytrace=False,
        )
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    script_path = base / "script.json"
    _write_json(script_path, lab_script)

    # Serve this checkout's build, ahead of any installed copy (first path wins).
    labext_dir = base / "labextensions" / "@prime-agent-lab"
    labext_dir.mkdir(parents=True)
    (labext_dir / "labextension").symlink_to(LABEXTENSION_BUILD, target_is_directory=True)

    config_dir = base / "config"
    _write_json(
        config_dir / "jupyter_server_config.json",
        {"ServerApp": {"jpserver_extensions": {"prime_agent_lab": True}}},
    )
    settings_dir = base / "settings"
    for plugin, values in lab_user_settings.items():
        _write_json(settings_dir / f"{plugin}.jupyterlab-settings", values)

    token = secrets.token_hex(16)
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        "--ServerApp.allow_root=True",
        f"--LabApp.user_settings_dir={settings_dir}",
        f"--LabApp.workspaces_dir={base / 'workspaces'}",
        f"--LabApp.extra_labextensions_path={base / 'labextensions'}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        f"--SQLiteYStore.db_path={base / 'ystore.db'}",
        f"--BaseFileIdManager.db_path={base / 'fileid.db'}",
        f"--BaseFileIdManager.root_dir={root}",
        "--PrimeAgentLab.provider=scripted",
        f"--PrimeAgentLab.script_path={script_path}",
        f"--PrimeAgentLab.sessions_dir={base / 'sessions'}",
    ]
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config_dir),
        "JUPYTER_DATA_DIR": str(base / "data"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        # The checkout's packages, for the server and for kernels it starts (they inherit it).
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), str(REPO / "kernel_ext"), os.environ.get("PYTHONPATH", "")) if p
        ),
        "PYTHONUNBUFFERED": "1",
    }
    log_path = base / "jupyter-lab.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = LabServer(
        url=f"http://127.0.0.1:{port}/",
        token=token,
        root_dir=root,
        log_path=log_path,
        process=process,
    )
    try:
        _wait_until_serving(server, time.monotonic() + SERVER_START_TIMEOUT)
        yield server
    finally:
        _shutdown(server)


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
