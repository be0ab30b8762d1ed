"""Which tests share one pytest-xdist worker under `pytest -n 2 --dist loadgroup` (docs/ci.md).

Every test gets an `xdist_group` (loadgroup runs each group on one worker, in order):
- `gateway-user`: every test that runs processes as the gateway's Unix user (marker `gateway`
  or a gateway fixture). A session's gateway fixtures end *every* process of that user at
  teardown (tests/gateway_fixtures.py) and the gateway benchmark ends those started during its
  run, so on two workers each would kill the other's gateway and kernels; on one worker the
  session's two gateways also start once, as in a serial run.
- `browser`: the browser tests, so one `jupyter lab` and one Chromium run at a time, as in a
  serial run (their UI timeouts were measured that way), beside the other worker's tests.
- otherwise the test's file, so a module-scoped fixture is made once, as in a serial run
  (loadgroup hands out ungrouped tests one by one).
A test that names its own `xdist_group` keeps it. Without xdist nothing is marked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

GATEWAY_GROUP = "gateway-user"
BROWSER_GROUP = "browser"
GATEWAY_FIXTURES = frozenset({"kernel_gateway", "enterprise_gateway", "any_gateway"})
BROWSER_TESTS = Path(__file__).parent / "browser"


def worker_group(item: pytest.Item) -> str:
    if item.get_closest_marker("gateway") is not None:
        return GATEWAY_GROUP
    if GATEWAY_FIXTURES & set(getattr(item, "fixturenames", ())):
        return GATEWAY_GROUP
    if item.path.is_relative_to(BROWSER_TESTS):
        return BROWSER_GROUP
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist appends the group to each node id
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(worker_group(item)))
