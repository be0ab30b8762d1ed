"""What plan mode tells the model and shows in the chat for a call it refused: the words one
declaration, read by the agent (which refuses the call), the permission module and the entry
registry (which turns the refused call's `tool_result` back into the chat's line on a reload)."""

PLAN_OBSERVATION = (
    "(not run: this session is in plan mode, where no cell runs. Do not call the python tool "
    "again; answer in text and describe the code you would run.)"
)
PLAN_NOT_RUN_TEXT = "Not run: this session is in plan mode, where no cell runs."
"""The chat's line for a call plan mode refused (the `plan_not_run` notice, live and reloaded)."""
