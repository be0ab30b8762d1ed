"""The version of Prime Agent Lab and of its kernel package, declared once.

The two always ship together (the product's wheel carries this package), so they share one
number. It lives here because the kernel package never imports the host's: both pyproject.toml
files read it (`[tool.hatch.version]`), and `prime_agent_lab.version` re-exports it.
"""

__version__ = "0.1.0"
