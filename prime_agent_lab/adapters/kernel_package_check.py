"""Whether an agent's kernel has the kernel package the host expects, and what to tell if not.

The kernel package is in the product's own environment, but a kernel may run elsewhere (a
gateway kernel image, another kernelspec's Python): there it may be missing, or of another
version than the server's. The host's setup cell reads the package's version and wire version
(`VERSIONS_EXPRESSION`, a user expression of the setup execution), and the setup's reply says the
rest. Whatever is wrong is told once, in the chat (a `kernel_package_problem` notice) and in the
observation of the first agent cell; cells still run (docs/gateway.md, "What a gateway kernel
image needs").
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from prime_agent_kernel.operations import WIRE_VERSION

from ..version import __version__

NOTICE_KIND = "kernel_package_problem"
VERSIONS = "prime_agent_kernel_versions"
# Also answers for a package older than the version check (no `__version__`, no wire version):
# it names what it cannot read as None.
VERSIONS_EXPRESSION = (
    "(lambda package: (getattr(package, '__version__', None), "
    "getattr(package.operations, 'WIRE_VERSION', None)))"
    "(__import__('prime_agent_kernel.operations'))"
)
PAGE = 'docs/gateway.md, "What a gateway kernel image needs"'
UNAVAILABLE = "`rlm`, `history`, snapshots and sub-agents"


@dataclass(frozen=True)
class KernelPackageProblem:
    text: str
    missing: bool = False  # no package at all (not another version of it)

    @property
    def note(self) -> str:
        """What the model reads in the first agent cell's observation."""
        return f"[note] {self.text}"

    @property
    def notice(self) -> tuple[str, str]:
        """The chat's notice (kind, text)."""
        return NOTICE_KIND, self.text


def problem(setup: dict[str, Any], versions: dict[str, Any] | None) -> KernelPackageProblem | None:
    """What is wrong with the kernel package, from the setup's reply content and the versions
    expression's result (the setup's own, or a later probe's when the setup failed)."""
    failed = setup.get("status") != "ok"
    why = f"{setup.get('ename')}: {setup.get('evalue')}"
    if versions is None or versions.get("status") != "ok":
        if _missing(versions):
            return KernelPackageProblem(
                "This kernel has no `prime_agent_kernel`: "
                f"{UNAVAILABLE} are unavailable; install `prime-agent-kernel` in the kernel's "
                f"environment ({PAGE}). Cells still run.",
                missing=True,
            )
        if not failed:
            return None  # set up, and a version it cannot tell is no reason to worry anyone
    else:
        found = _parse(versions)
        if found != (__version__, WIRE_VERSION):
            return KernelPackageProblem(_mismatch(found, why if failed else ""))
    if not failed:
        return None
    return KernelPackageProblem(
        f"The Prime Agent kernel package could not be loaded in this kernel ({why}), so "
        f"{UNAVAILABLE} are unavailable here. Cells still run. Install `prime-agent-kernel` "
        f"{__version__} in the kernel's environment ({PAGE})."
    )


def _missing(versions: dict[str, Any] | None) -> bool:
    return (
        versions is not None
        and versions.get("ename") == "ModuleNotFoundError"
        and "'prime_agent_kernel'" in str(versions.get("evalue"))
    )


def _parse(versions: dict[str, Any]) -> tuple[str | None, str | None]:
    try:
        version, wire = ast.literal_eval(versions["data"]["text/plain"])
    except (KeyError, ValueError, SyntaxError, TypeError):
        return None, None
    return _text(version), _text(wire)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _mismatch(found: tuple[str | None, str | None], why: str) -> str:
    version, wire = found
    kernel = f"version {version}" if version else "an older version (it has no version number)"
    text = (
        f"This kernel's `prime_agent_kernel` is {kernel}, bridge wire version "
        f"{wire or 'unknown'}; the server's is version {__version__}, wire version "
        f"{WIRE_VERSION}. "
    )
    if why:
        text += f"Its setup failed ({why}), so {UNAVAILABLE} are unavailable here. "
    elif wire != WIRE_VERSION:
        text += f"{UNAVAILABLE} may fail. "
    else:
        text += "They speak the same bridge protocol, but they are different releases. "
    return (
        f"{text}Cells still run. Install `prime-agent-kernel=={__version__}` in the kernel's "
        f"environment ({PAGE})."
    )
