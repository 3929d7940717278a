"""Reading server-sent events as a client does: `event:` and `data:` lines, blank-line ends."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

KEEPALIVE = "keep-alive"  # an event() name for a `: keep-alive` comment


@dataclass(frozen=True)
class Event:
    name: str
    data: Any  # the parsed JSON, or None for a comment


def parse(lines: Iterable[str]) -> list[Event]:
    """The events in a stream's lines, comments included as KEEPALIVE events, in order."""
    events: list[Event] = []
    name, data = "message", ""
    for line in lines:
        if line.startswith(":"):
            events.append(Event(KEEPALIVE, None))
        elif line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data += line.removeprefix("data:").strip()
        elif line == "" and data:
            events.append(Event(name, json.loads(data)))
            name, data = "message", ""
    return events


def parse_text(text: str) -> list[Event]:
    return parse(text.split("\n"))


def names(events: Iterable[Event]) -> list[str]:
    return [event.name for event in events]


def tokens(events: Iterable[Event]) -> str:
    return "".join(event.data["text"] for event in events if event.name == "token")
