"""MCP results as JSON-able values for the bridge: the SDK's models flattened into plain dicts.

A tool call becomes `{"structured": obj | None, "content": [block, ...], "is_error": bool,
"chars": int}`; a resource read becomes a list of blocks. A block is one of

    {"type": "text", "text"}
    {"type": "image" | "audio", "data": base64, "mime_type"}
    {"type": "resource", "uri", "text" | "blob" (base64), "mime_type"}
    {"type": "resource_link", "uri", "name", "mime_type"}

`chars` is the size of what the kernel keeps of it (the structured content when there is one,
else the content blocks) as JSON: what the output cap is measured on.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types


def tool_listing(tools: list[types.Tool]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
        for t in tools
    ]


def call_result(result: types.CallToolResult) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "structured": result.structured_content,
        "content": [content_block(block) for block in result.content],
        "is_error": bool(result.is_error),
    }
    # what the kernel keeps (kernel mcp.tool_value): the SDK sends a text twice, as content
    # and as structured content; the cap counts it once
    kept = wire["structured"] if wire["structured"] is not None else wire["content"]
    wire["chars"] = serialised_size(kept)
    return wire


def resource_contents(result: types.ReadResourceResult) -> list[dict[str, Any]]:
    return [_resource(contents) for contents in result.contents]


def content_block(block: types.ContentBlock) -> dict[str, Any]:
    if isinstance(block, types.TextContent):
        return {"type": "text", "text": block.text}
    if isinstance(block, types.ImageContent | types.AudioContent):
        return {"type": block.type, "data": block.data, "mime_type": block.mime_type}
    if isinstance(block, types.EmbeddedResource):
        return _resource(block.resource)
    if isinstance(block, types.ResourceLink):
        return {
            "type": "resource_link",
            "uri": str(block.uri),
            "name": block.name,
            "mime_type": block.mime_type,
        }
    return {"type": "text", "text": f"[an MCP content block of type {block.type!r}]"}


def _resource(
    contents: types.TextResourceContents | types.BlobResourceContents,
) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "resource", "uri": str(contents.uri)}
    if isinstance(contents, types.TextResourceContents):
        block["text"] = contents.text
    else:
        block["blob"] = contents.blob
    block["mime_type"] = contents.mime_type
    return block


def serialised_size(value: Any) -> int:
    """Characters of `value` as JSON: the measure of the output cap."""
    return len(json.dumps(value, ensure_ascii=False, default=str))
