"""The web console at /ui: plain HTML, CSS and JavaScript modules from
wms/web/, no build step. The pages call /api/v1 with the token the person
signed in with, like any other client; this module only serves the files."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope


WEB_DIR = Path(__file__).resolve().parent.parent / "web"
CONSOLE_PATH = "/ui"

# The console's pages load scripts, styles and data from this server only:
# a string the API returns can never run as script, even if a page had a
# flaw, and no other site may frame the console. no-cache: revalidated
# (ETag) on each load, so an upgraded server's files are used at once.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def headers_for(sign_in_origins: list[str]) -> dict[str, str]:
    """HEADERS, with requests allowed to the identity providers the console signs in
    with (their discovery document and token endpoint: wms.yaml ``console_client_id``)."""
    if not sign_in_origins:
        return dict(HEADERS)
    connect = " ".join(["'self'", *sorted(set(sign_in_origins))])
    return {**HEADERS, "Content-Security-Policy": HEADERS["Content-Security-Policy"] + f"; connect-src {connect}"}


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class ConsoleFiles(StaticFiles):
    """StaticFiles with the console's security and caching headers."""

    def __init__(self, *args: Any, headers: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.headers = headers

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(self.headers)
        return response


def mount_console(app: FastAPI, sign_in_urls: list[str] | None = None) -> None:
    """Serve wms/web/ under /ui (index.html for /ui/), and /ui itself as a redirect to /ui/;
    ``sign_in_urls``: the issuers the console signs in with, whose origins its pages may ask."""

    # A plain route, not an API one: it serves no data, so it has no access policy and no
    # row in the permission matrix.
    async def console_root(request: Request) -> RedirectResponse:
        return RedirectResponse(f"{CONSOLE_PATH}/")

    app.add_route(CONSOLE_PATH, console_root, include_in_schema=False)

    headers = headers_for([origin(url) for url in sign_in_urls or []])
    app.mount(CONSOLE_PATH, ConsoleFiles(directory=WEB_DIR, html=True, headers=headers), name="console")
