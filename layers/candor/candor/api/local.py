"""The app `candor serve` runs: the same routers, dependencies built once per process."""

from __future__ import annotations

from functools import cache

from fastapi import FastAPI

from candor.api.app import create_app
from candor.api.widget import with_widget
from candor.deps import Deps
from candor.settings import Settings


def create_local_app(settings: Settings) -> FastAPI:
    @cache
    def provider() -> Deps:
        from candor.factory import build_deps

        return build_deps(settings)

    return with_widget(create_app(provider))
