"""What every command group shares: exit codes, settings, and the subparsers type."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TypeAlias

from pydantic import ValidationError

from candor.settings import Settings

EXIT_USAGE = 2
EXIT_FAILED = 1

if TYPE_CHECKING:
    Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Commands = argparse._SubParsersAction


def settings_or_exit() -> Settings:
    """The settings from the environment; invalid ones end the command with the reason."""
    try:
        return Settings()
    except ValidationError as error:
        raise SystemExit(f"candor: invalid settings: {error}") from None
