"""The kernel package as its own distribution, `prime-agent-kernel` (kernel_ext/pyproject.toml),
for kernels outside the product's environment (docs/gateway.md, "What a gateway kernel image
needs"): its wheel, built here as pip builds it, requires only what the package imports, holds
the package and nothing of the server, and has the product's version; the product's own wheel
still carries the same package."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

from prime_agent_lab.version import __version__
from tests.python_source import parse

ROOT = Path(__file__).resolve().parents[1]
KERNEL_EXT = ROOT / "kernel_ext"
PACKAGE = KERNEL_EXT / "prime_agent_kernel"
# What the package may import besides the standard library and itself (its requirements).
ALLOWED_IMPORTS = {"IPython": "ipykernel", "dill": "dill", "ipywidgets": "ipywidgets"}
REQUIRED = {"ipykernel>=7", "dill>=0.3.8", "ipywidgets>=8.1; extra == 'panel'"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    """`pip wheel ./kernel_ext`, with the build backend of this environment (no index)."""
    out = tmp_path_factory.mktemp("kernel-wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "--wheel-dir", str(out), str(KERNEL_EXT)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    [path] = out.glob("*.whl")
    assert path.name == f"prime_agent_kernel-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(path) as archive:
        yield archive


def metadata(wheel: zipfile.ZipFile) -> Message:
    text = wheel.read(f"prime_agent_kernel-{__version__}.dist-info/METADATA").decode()
    return Parser().parsestr(text)


def test_the_kernel_wheel_requires_ipykernel_and_dill_and_the_panel_extra_ipywidgets(
    wheel: zipfile.ZipFile,
) -> None:
    meta = metadata(wheel)
    assert (meta["Name"], meta["Version"]) == ("prime-agent-kernel", __version__)
    assert meta["Requires-Python"] == ">=3.11"
    assert set(meta.get_all("Requires-Dist")) == REQUIRED
    assert meta.get_all("Provides-Extra") == ["panel"]


def test_the_kernel_wheel_asks_for_what_the_product_installs_with_the_same_specifiers() -> None:
    product = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    kernel = tomllib.loads((KERNEL_EXT / "pyproject.toml").read_text())["project"]
    extras = [r for extra in kernel["optional-dependencies"].values() for r in extra]
    assert set(kernel["dependencies"] + extras) <= set(product)


def test_the_kernel_wheel_holds_the_whole_package_and_nothing_of_the_server(
    wheel: zipfile.ZipFile,
) -> None:
    names = wheel.namelist()
    info = f"prime_agent_kernel-{__version__}.dist-info/"
    assert all(n.startswith(("prime_agent_kernel/", info)) for n in names), names
    sources = {f"prime_agent_kernel/{p.name}" for p in PACKAGE.glob("*.py")}
    assert {n for n in names if n.endswith(".py")} == sources
    imported: dict[str, set[str]] = {}
    for name in sorted(sources):
        for module in top_level_imports(wheel.read(name).decode()):
            imported.setdefault(module, set()).add(name)
    foreign = {
        module: files
        for module, files in imported.items()
        if module not in sys.stdlib_module_names
        and module not in ALLOWED_IMPORTS
        and module != "prime_agent_kernel"
    }
    assert not foreign, f"the kernel package imports what it does not require: {foreign}"
    assert "prime_agent_lab" not in imported and "jupyter_server" not in imported


def top_level_imports(source: str) -> set[str]:
    """Every module a source imports, by its top-level name (relative imports are its own)."""
    found: set[str] = set()
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_product_wheel_still_carries_the_kernel_package_with_one_version() -> None:
    """What hatchling puts in the product's wheel (the file list, without building the
    labextension), and the version both projects read from the kernel package."""
    from hatchling.builders.wheel import WheelBuilder
    from hatchling.metadata.core import ProjectMetadata
    from hatchling.plugin.manager import PluginManager

    builder = WheelBuilder(str(ROOT))
    shipped = {f.distribution_path for f in builder.recurse_included_files()}
    assert {f"prime_agent_kernel/{p.name}" for p in PACKAGE.glob("*.py")} <= shipped
    assert "prime_agent_lab/__init__.py" in shipped
    assert not any(path.startswith("kernel_ext/") for path in shipped)
    for project in (ROOT, KERNEL_EXT):
        assert ProjectMetadata(str(project), PluginManager()).version == __version__
