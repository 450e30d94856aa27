"""The web console at /ui: plain HTML, CSS and JavaScript modules from
wms/web/, no build step. The pages call /api/v1 with the token the person
signed in with, like any other client; this module only serves the files."""

from __future__ import annotations

from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from wms.api.deps import public

WEB_DIR = Path(__file__).resolve().parent.parent / "web"
CONSOLE_PATH = "/ui"


def mount_console(app: FastAPI) -> None:
    """Serve wms/web/ under /ui (index.html for /ui/), and /ui itself as a redirect to /ui/."""

    @app.get(CONSOLE_PATH, include_in_schema=False, dependencies=[Depends(public)])  # files only: no data
    def console_root() -> RedirectResponse:
        return RedirectResponse(f"{CONSOLE_PATH}/")

    app.mount(CONSOLE_PATH, StaticFiles(directory=WEB_DIR, html=True), name="console")
