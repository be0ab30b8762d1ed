"""IPython configuration a notebook kernel starts with (`--config=<this file>`, added by
`kernel_startup.load_package_at_start`): load the kernel package's startup extension.

`append` adds it to the extra extensions the user's own configuration lists; the command-line
form (`--IPKernelApp.extra_extensions=...`) would replace those instead.
"""

c = get_config()  # noqa: F821  (traitlets defines it in a configuration file)
c.IPKernelApp.extra_extensions.append("prime_agent_kernel.startup")
