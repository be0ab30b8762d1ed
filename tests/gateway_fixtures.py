"""A real Jupyter Kernel Gateway or Enterprise Gateway as another Unix user, and a jupyter server
pointed at it (issue 20, docs/gateway.md part 4).

`kernel_gateway` makes the user `gwtest` and the gateways' venvs with `.ci/gateway-setup` (cached:
seconds once done), then starts `jupyter kernelgateway` as that user in its own `~/work`, on a
free loopback port with an auth token (in its environment, not its argv). It skips, saying why,
only where it cannot run at all (not root, no `useradd`/`su`); a failing set-up is an error. At
teardown it ends the gateway's process group and every process left to `gwtest` (its kernels run
in sessions of their own). `enterprise_gateway` does the same with `jupyter enterprisegateway`
(its own venv, kernels from the Kernel Gateway venv's python through LocalProcessProxy), and
skips only when no index offers the package (`.ci/enterprise-gateway-setup`); `any_gateway` is
each of the two in turn.
`start_gateway_server` starts `jupyter server` with Prime Agent Lab on the scripted provider and
`--gateway-url`, in a folder the gateway user cannot read.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import pytest

from prime_agent_lab.core.sessions import SESSION_FILE

from .lab_process import REPO, LabServer, ServerDidNotStart, free_port, shutdown, write_json

# Another user and venv for a second checkout testing on the same machine (.ci/gateway-setup).
GATEWAY_USER = os.environ.get("PRIME_AGENT_GW_USER", "gwtest")
GATEWAY_VENV = Path(os.environ.get("PRIME_AGENT_GW_VENV", "/opt/prime-agent-gw/kg"))
ENTERPRISE_VENV = Path(os.environ.get("PRIME_AGENT_GW_EG_VENV", f"{GATEWAY_VENV}-enterprise"))
SETUP_SCRIPT = REPO / ".ci" / "gateway-setup"
GATEWAY_START_TIMEOUT = 120.0  # 6.5 to 16 s measured on 2 busy cores (docs/gateway.md 1.2)
SERVER_START_TIMEOUT = 120.0


@dataclass(frozen=True)
class GatewayKind:
    """What starting one kind of gateway takes (docs/gateway.md 1.2)."""

    name: str  # the fixture's
    venv: Path
    command: str  # `jupyter <command>`
    app: str  # its configurable for ip, port and port_retries
    token_variable: str  # where it reads its auth token (argv would show it in `ps`)
    list_kernels: str  # without it `GET /api/kernels` answers 403


KERNEL_GATEWAY = GatewayKind(
    "kernel_gateway",
    GATEWAY_VENV,
    "kernelgateway",
    "KernelGatewayApp",
    "KG_AUTH_TOKEN",
    "--JupyterWebsocketPersonality.list_kernels=True",
)
ENTERPRISE_GATEWAY = GatewayKind(
    "enterprise_gateway",
    ENTERPRISE_VENV,
    "enterprisegateway",
    "EnterpriseGatewayApp",
    "EG_AUTH_TOKEN",
    "--EnterpriseGatewayApp.list_kernels=True",
)


@dataclass
class KernelGateway:
    url: str  # http://127.0.0.1:<port>, no trailing slash
    token: str
    log_path: Path
    process: subprocess.Popen[bytes]
    user: str
    home: Path
    kind: GatewayKind = KERNEL_GATEWAY

    def api(self, path: str, timeout: float = 10.0) -> Any:
        request = urllib.request.Request(
            f"{self.url}/{path.lstrip('/')}", headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read() or b"null")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kernel_ids(self) -> set[str]:
        return {kernel["id"] for kernel in self.api("api/kernels")}


def cannot_run_reason() -> str | None:
    """Why this machine cannot run a gateway as another user (None: it can)."""
    if os.geteuid() != 0:
        return "the gateway tests need root: they create the Unix user gwtest and run as it"
    for tool in ("useradd", "su", "pgrep"):
        if shutil.which(tool) is None:
            return f"the gateway tests need `{tool}`, which this machine does not have"
    return None


def run_setup() -> None:
    """`.ci/gateway-setup` (idempotent); its output in the failure when it fails."""
    done = subprocess.run(
        ["nice", "-n", "19", "bash", str(SETUP_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            f".ci/gateway-setup failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
            f"{done.stderr[-3000:]}",
            pytrace=False,
        )


def user_cannot_read(path: Path, user: str = GATEWAY_USER) -> bool:
    probe = subprocess.run(
        ["su", user, "-c", f"ls {path}"], capture_output=True, text=True, check=False
    )
    return probe.returncode != 0


def end_user_processes(user: str) -> None:
    """SIGKILL every process of `user` (the test's own user: the gateway and its kernels)."""
    for _ in range(20):
        found = subprocess.run(["pgrep", "-u", user], capture_output=True, text=True, check=False)
        pids = [int(pid) for pid in found.stdout.split()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


@pytest.fixture(scope="session")
def kernel_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelGateway]:
    reason = cannot_run_reason()
    if reason is not None:
        pytest.skip(reason)
    run_setup()
    try:
        with started_kernel_gateway(tmp_path_factory.mktemp("gateway")) as gateway:
            yield gateway
    finally:
        end_user_processes(GATEWAY_USER)


@pytest.fixture(scope="session")
def enterprise_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelGateway]:
    reason = cannot_run_reason()
    if reason is not None:
        pytest.skip(reason)
    run_setup()
    unavailable = Path(f"{ENTERPRISE_VENV}.unavailable")
    if unavailable.exists():
        pytest.skip(f"Enterprise Gateway cannot be installed here: {unavailable.read_text()}")
    try:
        with started_kernel_gateway(
            tmp_path_factory.mktemp("enterprise-gateway"), kind=ENTERPRISE_GATEWAY
        ) as gateway:
            yield gateway
    finally:
        end_user_processes(GATEWAY_USER)


@pytest.fixture(params=[KERNEL_GATEWAY.name, ENTERPRISE_GATEWAY.name])
def any_gateway(request: pytest.FixtureRequest) -> KernelGateway:
    """Each kind of gateway in turn (tests/conftest.py makes the three fixtures the session's)."""
    gateway: KernelGateway = request.getfixturevalue(request.param)
    return gateway


@contextlib.contextmanager
def started_kernel_gateway(
    log_dir: Path, *extra_args: str, kind: GatewayKind = KERNEL_GATEWAY
) -> Iterator[KernelGateway]:
    """A gateway of `kind` as `GATEWAY_USER` (set up already), its log in `log_dir`; at the end
    its process group goes (its kernels run in sessions of their own: `end_user_processes`)."""
    home = Path(os.path.expanduser(f"~{GATEWAY_USER}"))
    token = os.urandom(16).hex()
    port = free_port()
    command = (
        f"cd {home / 'work'} && exec {kind.venv}/bin/jupyter {kind.command}"
        f" --{kind.app}.ip=127.0.0.1 --{kind.app}.port={port} --{kind.app}.port_retries=0"
        f" {kind.list_kernels} " + " ".join(extra_args)
    )
    log_path = log_dir / "gateway.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            # `su -` starts from a clean environment but for the variables -w names.
            ["su", "-w", kind.token_variable, "-", GATEWAY_USER, "-c", command],
            env={**os.environ, kind.token_variable: token},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    gateway = KernelGateway(
        f"http://127.0.0.1:{port}", token, log_path, process, GATEWAY_USER, home, kind
    )
    try:
        _wait_until_gateway_answers(gateway)
        yield gateway
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def _wait_until_gateway_answers(gateway: KernelGateway) -> None:
    deadline = time.monotonic() + GATEWAY_START_TIMEOUT
    while time.monotonic() < deadline:
        if gateway.process.poll() is not None:
            raise ServerDidNotStart(f"the {gateway.kind.command} exited:\n{gateway.log()[-4000:]}")
        with contextlib.suppress(OSError, urllib.error.URLError):
            gateway.api("api/kernelspecs", timeout=2)
            return
        time.sleep(0.3)
    raise ServerDidNotStart(f"the {gateway.kind.command} did not answer:\n{gateway.log()[-4000:]}")


def start_gateway_server(
    base: Path, gateway: KernelGateway, script: dict[str, Any], *extra_args: str
) -> LabServer:
    """`jupyter server` with Prime Agent Lab (scripted provider) whose kernels come from
    `gateway`, in `base`, a folder the gateway's user cannot read (checked)."""
    assert user_cannot_read(base, gateway.user), f"{gateway.user} can read the server's {base}"
    root = base / "root"
    root.mkdir(parents=True, exist_ok=True)
    config_dir = base / "config"
    write_json(
        config_dir / "jupyter_server_config.json",
        {"ServerApp": {"jpserver_extensions": {"prime_agent_lab": True}}},
    )
    script_path = base / "script.json"
    write_json(script_path, script)
    token = os.urandom(16).hex()
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "jupyter_server",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        "--ServerApp.allow_root=True",
        f"--gateway-url={gateway.url}",
        f"--PrimeAgentLab.bridge_url=http://127.0.0.1:{port}/prime-agent/bridge",
        "--PrimeAgentLab.provider=scripted",
        f"--PrimeAgentLab.script_path={script_path}",
        f"--PrimeAgentLab.sessions_dir={base / 'sessions'}",
        f"--SQLiteYStore.db_path={base / 'ystore.db'}",
        f"--BaseFileIdManager.db_path={base / 'fileid.db'}",
        f"--BaseFileIdManager.root_dir={root}",
        *extra_args,
    ]
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config_dir),
        "JUPYTER_DATA_DIR": str(base / "data"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "PRIME_AGENT_LAB_SECRET_FILE": str(base / "data" / "prime_agent_lab" / "signing_secret"),
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), str(REPO / "kernel_ext"), os.environ.get("PYTHONPATH", "")) if p
        ),
        "PYTHONUNBUFFERED": "1",
        "JUPYTER_GATEWAY_AUTH_TOKEN": gateway.token,  # as the README says: not on the command line
    }
    log_path = base / "server.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = LabServer(f"http://127.0.0.1:{port}/", token, base, root, log_path, process)
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServerDidNotStart(f"jupyter server exited:\n{server.log_tail()}")
        with contextlib.suppress(OSError, urllib.error.URLError):
            server.api("GET", "prime-agent/api/info", timeout=2)
            return server
        time.sleep(0.3)
    shutdown(server)
    raise ServerDidNotStart(f"jupyter server did not answer:\n{server.log_tail()}")


NOTEBOOK = "analysis.ipynb"


def server_on_a_notebook(
    tmp_path: Path, gateway: KernelGateway, script: dict[str, Any], *extra_args: str
) -> tuple[Path, LabServer]:
    """`start_gateway_server` in `tmp_path/server` (only its user can read it), with an empty
    Python notebook `analysis.ipynb` in its root: the folder and the server."""
    base = tmp_path / "server"
    base.mkdir(mode=0o700)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    (base / "root").mkdir()
    nbformat.write(notebook, base / "root" / NOTEBOOK)
    return base, start_gateway_server(base, gateway, script, *extra_args)


def attach_agent(server: LabServer, base: Path) -> tuple[str, Path]:
    """An agent attached to `analysis.ipynb` over REST: its session id and session log."""
    session = server.api("POST", "prime-agent/api/sessions", {"notebook_path": NOTEBOOK})
    session_id: str = session["session_id"]
    return session_id, base / "sessions" / session_id / SESSION_FILE


def notebook_kernel(server: LabServer, path: str = NOTEBOOK) -> str:
    """The id of the kernel the server's Jupyter session of `path` runs on."""
    (kernel_id,) = [
        model["kernel"]["id"]
        for model in server.api("GET", "api/sessions")
        if model["path"] == path
    ]
    return kernel_id
