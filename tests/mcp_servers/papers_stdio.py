"""The papers test server (papers.py) over stdio.

    python tests/mcp_servers/papers_stdio.py [--linger]

`--linger`: once its stdin closes, ignore SIGTERM and stay alive (a server that will not exit by
itself, for the tests of closing).
"""

from __future__ import annotations

import signal
import sys
import time

from papers import server

if __name__ == "__main__":
    server.run("stdio")
    if "--linger" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        time.sleep(600)
