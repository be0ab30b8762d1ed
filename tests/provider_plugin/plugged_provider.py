"""A model provider that only an entry point registers: the test of providers as plugins.

tests/test_provider_plugins.py installs this module as a distribution of its own (a
`*.dist-info` folder with an `entry_points.txt`, in a directory on PYTHONPATH) and runs the CLI
and a server on it. Each turn runs one cell that says whether the kernel can read the plugin's
key variable, prints a file holding the key's value and the context window the host uses; the
answer then repeats the cell's output and says whether the provider was handed its key.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from prime_agent_lab.core.messages import ModelRequest, ModelResponse, ToolCall
from prime_agent_lab.core.ports import (
    ErrorMapping,
    ProviderOptions,
    ProviderPlugin,
    ResponseDone,
    TextDelta,
)

KEY_VARIABLE = "PLUGGED_API_KEY"
CELL = (
    "import os\n"
    f"print('kernel reads the key variable:', {KEY_VARIABLE!r} in os.environ)\n"
    "print('the file holds', open('plugged-key.txt').read().strip())\n"
    "print('context window', (await compact.status())['context_window'])\n"
)


class PluggedProvider:
    name = "plugged"

    def __init__(self, model: str, options: ProviderOptions) -> None:
        self.model = model
        self.key = options.held_keys.get(KEY_VARIABLE)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        last = request.messages[-1] if request.messages else None
        if request.purpose != "turn":
            response = ModelResponse(text="nothing to add", model=self.model)
        elif last is not None and last.role == "tool":
            held = "yes" if self.key else "no"
            text = f"{last.text.strip()} | the provider holds its key: {held}"
            response = ModelResponse(text=text, model=self.model)
        else:
            call_id = f"plugged-{len(request.messages)}"
            call = ToolCall(id=call_id, name="python", arguments=json.dumps({"code": CELL}))
            response = ModelResponse(tool_calls=[call], stop_reason="tool_use", model=self.model)
        if response.text:
            yield TextDelta(response.text)
        yield ResponseDone(response)

    async def aclose(self) -> None:
        pass


PLUGIN = ProviderPlugin(
    name="plugged",
    make=PluggedProvider,
    default_model="plugged-small",
    key_variables=(KEY_VARIABLE,),
    context_windows={"plugged-": 32_000, "plugged-large": 1_000_000},
    default_context_window=8_000,
    errors=ErrorMapping(vendor="Plugged API", key_variable=KEY_VARIABLE),
    summary="a test provider, registered only by its entry point",
)
