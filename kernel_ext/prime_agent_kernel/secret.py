"""The per-kernel secret, taken from a one-shot comm the host opens at setup.

A host that does not hold this kernel's connection key (the kernel runs on a Jupyter gateway,
which made that key) draws a secret of its own for the kernel and signs nothing with anything
else. It hands the secret over on the kernel's own channel, as the data of a comm opened to
`KEY_COMM_TARGET` right after its silent setup cell: not as code, so it is in no execute request,
no `In`, no history and no notebook. The target takes one secret, binds the kernel API with it,
closes the comm with `{"ok": true}` (or the error) as the host's acknowledgement, and is gone.
The same answer is kept for `answer(comm_id)`, which the host reads on the shell channel right
after: its iopub subscription can miss the `comm_close` of a kernel process that has just started.
"""

from __future__ import annotations

import json
from typing import Any

KEY_COMM_TARGET = "prime_agent.key"  # must match prime_agent_lab.adapters.kernel_secret
SECRET_BYTES = 32
_answers: dict[str, dict[str, Any]] = {}  # comm id -> the answer its comm_close carried


def answer(comm_id: str) -> str:
    """The answer given to the host's comm `comm_id`, as JSON, once ({}: no such comm taken)."""
    return json.dumps(_answers.pop(comm_id, {}))


def expect_secret(bridge_url: str, kernel_id: str, shell: Any = None) -> None:
    """Wait for the host's secret on a comm, then `configure` the bridge with it."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    manager = shell.kernel.comm_manager

    def take(comm: Any, msg: dict[str, Any]) -> None:
        manager.unregister_target(KEY_COMM_TARGET, take)  # one secret per setup
        try:
            secret = bytes.fromhex(str(msg["content"]["data"]["secret"]))
            if len(secret) != SECRET_BYTES:
                raise ValueError(f"the secret must be {SECRET_BYTES} bytes, not {len(secret)}")
            from . import configure

            configure(bridge_url, kernel_id, shell, secret=secret)
            said: dict[str, Any] = {"ok": True}
        except Exception as exc:  # told to the host; the secret itself is never in the answer
            said = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        _answers[str(comm.comm_id)] = said
        comm.close(data=said)

    manager.register_target(KEY_COMM_TARGET, take)
