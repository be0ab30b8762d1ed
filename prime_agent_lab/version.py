"""The package version: the kernel package declares it for both (they ship together)."""

from prime_agent_kernel.version import __version__

__all__ = ["__version__"]
