"""A cell of another branch is dimmed, but its "other branch" badge, the one thing that says why,
stays readable in the light and the dark theme (WCAG AA: 4.5:1 for small text)."""

from __future__ import annotations

from typing import Any

import nbformat
import pytest

from .conftest import LabServer
from .test_chat_panel import UI_TIMEOUT_MS, _open_notebook

pytestmark = pytest.mark.browser

MIN_CONTRAST = 4.5

# The badge's effective text and background colours: the ::after colours composited with every
# opacity from the badge up to the page, over the first opaque background behind the cell.
BADGE_CONTRAST_JS = """
(cell) => {
  const rgba = (text) => {
    const m = text.match(/rgba?\\(([^)]+)\\)/);
    const [r, g, b, a] = m[1].split(',').map(Number);
    return [r, g, b, Number.isNaN(a) || a === undefined ? 1 : a];
  };
  const over = (top, base, alpha) => top.map((c, i) => c * alpha + base[i] * (1 - alpha));
  let behind = [255, 255, 255];
  for (let el = cell; el; el = el.parentElement) {
    const bg = rgba(getComputedStyle(el).backgroundColor);
    if (bg[3] === 1) { behind = bg.slice(0, 3); break; }
  }
  const badge = getComputedStyle(cell, '::after');
  let alpha = Number(badge.opacity);
  for (let el = cell; el; el = el.parentElement) alpha *= Number(getComputedStyle(el).opacity);
  const bg = rgba(badge.backgroundColor);
  const fg = rgba(badge.color);
  const badgeBg = over(bg.slice(0, 3), behind, bg[3]);
  const badgeFg = over(fg.slice(0, 3), badgeBg, fg[3]);
  const seenBg = over(badgeBg, behind, alpha);
  const seenFg = over(badgeFg, behind, alpha);
  const lum = (c) => {
    const [r, g, b] = c.map((v) => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const [hi, lo] = [lum(seenFg), lum(seenBg)].sort((x, y) => y - x);
  return { contrast: (hi + 0.05) / (lo + 0.05), text: badge.content };
}
"""


def _notebook_with_a_cell_of_another_branch(server: LabServer, name: str) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    agent = {"session_id": "20260101-000000-abcdef", "turn": 2}
    here = nbformat.v4.new_code_cell("x = 1", metadata={"prime_agent": agent})
    other = nbformat.v4.new_code_cell(
        "y = 2", metadata={"prime_agent": {**agent, "turn": 3, "branch": "other"}}
    )
    notebook.cells = [here, other]
    nbformat.write(notebook, server.root_dir / name)


def _switch_theme(page: Any, theme: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
    page.get_by_text(theme, exact=True).click()


@pytest.mark.parametrize(
    ("theme", "light"), [("JupyterLab Light", "true"), ("JupyterLab Dark", "false")]
)
def test_the_other_branch_badge_is_readable_in_light_and_dark_theme(
    lab_server: LabServer, page: Any, theme: str, light: str
) -> None:
    from playwright.sync_api import expect

    name = f"badge-{light}.ipynb"
    _notebook_with_a_cell_of_another_branch(lab_server, name)
    _open_notebook(page, lab_server, name)
    other = page.locator(".jp-NotebookPanel .jp-Cell.pal-agent-cell.pal-other-branch")
    expect(other).to_have_count(1, timeout=UI_TIMEOUT_MS)
    _switch_theme(page, theme)
    expect(page.locator("body")).to_have_attribute(
        "data-jp-theme-light", light, timeout=UI_TIMEOUT_MS
    )

    seen = other.evaluate(BADGE_CONTRAST_JS)

    assert "other branch" in seen["text"]
    assert seen["contrast"] >= MIN_CONTRAST, seen
