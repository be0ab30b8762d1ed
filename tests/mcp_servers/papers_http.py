"""The papers test server (papers.py) over streamable HTTP, at http://127.0.0.1:PORT/mcp.

python tests/mcp_servers/papers_http.py --port N
"""

from __future__ import annotations

import argparse

from papers import server

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    server.run("streamable-http", host="127.0.0.1", port=port)
