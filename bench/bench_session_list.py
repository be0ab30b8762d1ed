"""Opening the session list of a notebook: what the panel waits for, through a real server.

A project folder holds `--sessions` sessions spread over `--notebooks` notebooks, each
`--entries` entries long
(written with the product's `SessionLog`, like `bench_history.py`). A real `jupyter server`
process with the extension serves it, and this process times, over HTTP with the server's
token, as medians of `--repeat` requests:

- floor: `GET /prime-agent/api/info`, the extension's smallest authenticated reply (what any
  request to this server costs);
- disk: reading every session log whole in this process (what a list without its cache costs
  at least: the logs must be read once);
- cold: the first `GET /prime-agent/api/sessions?notebook=…` (one notebook's) after the server
  started (that notebook's logs read and summarized, the others' told apart by their header);
- warm: the same request again (nothing changed: summaries come from the cache);
- one changed: the same request after one of its sessions got one more message (one log read
  again).

Run: `python bench/bench_session_list.py [--sessions 100] [--notebooks 10] [--entries 2000]
[--repeat 15]`.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "kernel_ext")]

from bench_history import write_session  # noqa: E402

from prime_agent_lab.core.sessions import SESSION_FILE, SessionRepository  # noqa: E402


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A `jupyter server` process on the project folder, with a token of its own."""

    def __init__(self, root: Path) -> None:
        self.port = free_port()
        self.token = secrets.token_hex(16)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "kernel_ext")])}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter_server",
                "--no-browser",
                "--allow-root",
                f"--port={self.port}",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={root}",
                "--ServerApp.jpserver_extensions={'prime_agent_lab': True}",
            ],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def get(self, path: str) -> bytes:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            return bytes(response.read())

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.get("/prime-agent/api/info")
                return
            except OSError:
                time.sleep(0.1)
        raise SystemExit("the server did not answer within 60 s")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def timed_ms(work: object) -> float:
    start = time.perf_counter()
    work()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


def median_ms(work: object, repeat: int) -> float:
    return statistics.median(timed_ms(work) for _ in range(repeat))


def read_all_logs(sessions: Path) -> int:
    return sum(len((d / SESSION_FILE).read_bytes()) for d in sessions.iterdir() if d.is_dir())


def notebook(index: int) -> str:
    return f"analysis-{index}.ipynb"


def measure(count: int, notebooks: int, entries: int, repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        ids = [write_session(root, entries, notebook(i % notebooks)) for i in range(count)]
        own = ids[::notebooks]  # the sessions of notebook(0)
        sessions = root / ".prime-agent" / "sessions"
        size = read_all_logs(sessions)
        listing = f"/prime-agent/api/sessions?notebook={notebook(0)}"
        server = Server(root)
        try:
            server.wait_ready()
            figures = {"cold": timed_ms(lambda: server.get(listing))}
            listed = json.loads(server.get(listing))["sessions"]
            if len(listed) != len(own):
                raise SystemExit(f"the list has {len(listed)} sessions, expected {len(own)}")
            figures["warm"] = median_ms(lambda: server.get(listing), repeat)
            figures["floor"] = median_ms(lambda: server.get("/prime-agent/api/info"), repeat)
            figures["disk"] = median_ms(lambda: read_all_logs(sessions), repeat)
            changed = []
            repository = SessionRepository(sessions)
            for turn in range(repeat):
                log = repository.load(own[turn % len(own)])
                log.append("user_message", text=f"one more {turn}", turn=entries + turn)
                changed.append(timed_ms(lambda: server.get(listing)))
            figures["one changed"] = statistics.median(changed)
        finally:
            server.close()
        figures["log bytes"] = float(size)
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--notebooks", type=int, default=10)
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    figures = measure(args.sessions, args.notebooks, args.entries, args.repeat)
    megabytes = figures["log bytes"] / 1e6
    print(
        f"{args.sessions} sessions of {args.entries} entries over {args.notebooks} notebooks"
        f" ({megabytes:.1f} MB of logs); the list of one notebook"
    )
    print("| request | ms | ratio to floor |")
    print("| --- | --- | --- |")
    for key in ("floor", "disk", "cold", "warm", "one changed"):
        print(f"| {key} | {figures[key]:.1f} | {figures[key] / figures['floor']:.1f} |")


if __name__ == "__main__":
    main()
