"""MCP servers for the agent's cells (docs/mcp.md): their configuration (`config`), the hub that
owns their sessions in the host (`hub`), the shape of their results (`results`) and the prompt's
section about them (`prompt`)."""
