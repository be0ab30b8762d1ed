"""A cell whose output went over the IOPub data rate limit of the Jupyter server or gateway
between the kernel and the agent (review D6). The limit lives in the websocket connection of
jupyter_server (`ZMQChannelsWebsocketConnection.iopub_data_rate_limit`, 1 MB/s by default), which
a Kernel Gateway serves agent kernels through and the server's own local kernels do not (the
executor reaches those over ZMQ): past it, output is dropped until the rate falls and the cell
shows only the server's "IOPub data rate exceeded" text. The model and the chat are told what
happened, which setting raises the limit, and how to print less."""

from __future__ import annotations

from typing import Any

NOTICE_KIND = "output_rate_limited"
MARK = "IOPub data rate exceeded"
SETTING = "ZMQChannelsWebsocketConnection.iopub_data_rate_limit"
TEXT = (
    "Part of this cell's output was dropped on its way from the kernel: it went over the IOPub "
    "data rate limit of the Jupyter gateway (or server) in between, which then stops sending "
    "output for a while (the 'IOPub data rate exceeded' text in its output). What the cell "
    "computed is intact in the kernel. Print less: a slice or a summary (`df.head()`, `len(x)`, "
    "a sample), or write large results to a file and read parts of it. The limit is set on the "
    f"gateway or server that runs the kernel: `--{SETTING}=<bytes per second>` "
    "(`ServerApp.iopub_data_rate_limit` in older configurations; 0 turns it off)."
)


def rate_limited(outputs: list[dict[str, Any]]) -> bool:
    """Whether the server or gateway between the kernel and the agent dropped output of the
    cell (its stderr then holds the server's notice of the limit)."""
    return any(
        output.get("output_type") == "stream" and MARK in str(output.get("text", ""))
        for output in outputs
    )


def note() -> str:
    """What the model reads after the cell's output."""
    return f"[output dropped] {TEXT}"


def notice() -> tuple[str, str]:
    """The chat's notice (kind, text)."""
    return NOTICE_KIND, TEXT
