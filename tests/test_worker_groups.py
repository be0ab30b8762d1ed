"""What must share one pytest-xdist worker does (tests/worker_groups.py, docs/ci.md): a real
`pytest -n 2 --dist loadgroup` on a small suite, and the suite's own gateway tests marked."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xdist", reason="pytest-xdist is in the test extras")

TESTS = Path(__file__).parent
REPO = TESTS.parent
# What a test module names when it runs processes as the gateway's Unix user without a gateway
# fixture (the gateway benchmark) or with one it imports itself.
XDIST = ("-n", "2", "--dist", "loadgroup")
GATEWAY_USER_SIGNS = ("gateway_fixtures", "bench_gateway", "GATEWAY_USER", "gwtest")

CONFTEST = """
import pytest
from tests.worker_groups import pytest_collection_modifyitems

@pytest.fixture
def kernel_gateway():
    return "a gateway"
"""
GATEWAY_BY_MARK = """
import pytest
pytestmark = pytest.mark.gateway
def test_one(): pass
def test_two(): pass
"""
GATEWAY_BY_FIXTURE = """
def test_three(kernel_gateway): pass
def test_four(kernel_gateway): pass
"""
PLAIN = """
import pytest
pytestmark = pytest.mark.xdist_group("its-own")
def test_five(): pass
"""
FILE = """
def test_six(): pass
def test_seven(): pass
"""


def run_two_workers(folder: Path) -> str:
    paths = [str(REPO), str(folder), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            *XDIST,
            "-v",
            "--rootdir",
            str(folder),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_gateway_tests_share_one_worker_and_the_others_keep_their_file_or_own_group(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_by_mark.py").write_text(GATEWAY_BY_MARK)
    (tmp_path / "test_by_fixture.py").write_text(GATEWAY_BY_FIXTURE)
    (tmp_path / "test_plain.py").write_text(PLAIN)
    (tmp_path / "test_file.py").write_text(FILE)
    out = run_two_workers(tmp_path)
    ran = re.findall(r"\[(gw\d)\] \[[ \d]+%\] PASSED (\S+)", out)
    passed = {nodeid: worker for worker, nodeid in ran}
    assert len(passed) == 7, out
    groups = dict(nodeid.split("::")[1].rsplit("@", 1) for nodeid in passed)
    assert groups == {
        "test_one": "gateway-user",
        "test_two": "gateway-user",
        "test_three": "gateway-user",
        "test_four": "gateway-user",
        "test_five": "its-own",
        "test_six": "test_file.py",
        "test_seven": "test_file.py",
    }, out
    assert len({w for n, w in passed.items() if n.endswith("@gateway-user")}) == 1, out


def test_every_test_module_that_runs_the_gateway_user_is_marked_gateway() -> None:
    unmarked = [
        str(path.relative_to(REPO))
        for path in sorted(TESTS.rglob("test_*.py"))
        if path != Path(__file__)
        and any(sign in (source := path.read_text(encoding="utf-8")) for sign in GATEWAY_USER_SIGNS)
        and "pytest.mark.gateway" not in source
    ]
    assert not unmarked, f"start the gateway user's processes without marker `gateway`: {unmarked}"
