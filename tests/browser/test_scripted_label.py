"""The panel names a script of one's own by its file name (`scripted · script.json`, the file
`start_lab` writes), not as the bundled demo (`scripted · demo`)."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import LabServer
from .test_chat_panel import (
    KERNEL_IDLE_TIMEOUT,
    UI_TIMEOUT_MS,
    _create_notebook,
    _open_notebook,
    _open_panel,
    _wait_for_idle_kernel,
)

pytestmark = pytest.mark.browser


def test_the_panel_labels_a_custom_script_with_its_file_name(
    page: Any, lab_server: LabServer
) -> None:
    from playwright.sync_api import expect

    name = "scripted-label.ipynb"
    _create_notebook(lab_server, name)
    _open_notebook(page, lab_server, name)
    _wait_for_idle_kernel(lab_server, name, KERNEL_IDLE_TIMEOUT)
    panel = _open_panel(page)
    expect(panel.get_by_test_id("pal-status")).to_have_attribute(
        "data-connection", "connected", timeout=UI_TIMEOUT_MS
    )
    label = panel.locator(".pal-status-model")
    expect(label).to_have_text("scripted · script.json", timeout=UI_TIMEOUT_MS)
