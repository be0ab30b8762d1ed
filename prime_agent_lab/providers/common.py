"""Small helpers shared by the SDK-based providers."""

from __future__ import annotations

import json
from typing import Any


def tool_input(arguments: str) -> dict[str, Any]:
    """The tool-call arguments as a JSON object for the wire.

    The model's raw arguments are kept verbatim in history. When they are not a JSON object the
    vendor would reject the whole conversation, so they are resent as `{"code": <raw string>}`,
    which is also what the model most likely meant.
    """
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return {"code": arguments}
    return value if isinstance(value, dict) else {"code": arguments}


def tool_arguments_json(arguments: str) -> str:
    """`tool_input` serialised again, for wire formats that carry arguments as a string."""
    try:
        value = json.loads(arguments)
    except (TypeError, ValueError):
        return json.dumps({"code": arguments})
    return arguments if isinstance(value, dict) else json.dumps({"code": arguments})
