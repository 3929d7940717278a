"""Running a real handler module: its file loaded fresh, a real-shaped event, a Lambda context."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"


def load_event(name: str) -> dict[str, Any]:
    """An event from events/ by file name."""
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


def set_header(event: dict[str, Any], name: str, value: str | None) -> None:
    """Set (or with None, remove) a header of a REST API event, in both of its header maps."""
    for key, wrap in (("headers", lambda v: v), ("multiValueHeaders", lambda v: [v])):
        headers = event.get(key)
        if headers is None:
            continue
        for present in [h for h in headers if h.lower() == name.lower()]:
            del headers[present]
        if value is not None:
            headers[name] = wrap(value)


def load_handler(function: str) -> ModuleType:
    """functions/<function>/app.py as a new module, so each test gets its own app and caches."""
    path = ROOT / "functions" / function / "app.py"
    spec = importlib.util.spec_from_file_location(f"{function}_app", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class LambdaContext:
    """The attributes of the runtime's context object that Powertools and Mangum read."""

    function_name: str = "candor"
    memory_limit_in_mb: int = 1024
    aws_request_id: str = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:eu-west-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 28_000
