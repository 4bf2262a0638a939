"""What a console form's defaults are checked against: a command's own defaults."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def command_defaults(command: Callable[..., Any], *leave_out: str) -> dict[str, Any]:
    """``command``'s parameters that have a default, by name, less ``leave_out`` (the
    command's own options a form has no field for: each must exist)."""
    parameters = inspect.signature(command).parameters.items()
    defaults = {n: p.default for n, p in parameters if p.default is not inspect.Parameter.empty}
    for own in leave_out:
        defaults.pop(own)
    return defaults
