"""/docs and /redoc served from files that a PyPI package ships (fastapi-offline's copies of Swagger UI and ReDoc),
so the API docs render on machines with no internet access.

FastAPI's own pages load both from a CDN, which a training cluster often cannot reach.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_PATH = "/docs"
REDOC_PATH = "/redoc"
OAUTH2_REDIRECT_PATH = "/docs/oauth2-redirect"
ASSETS_PATH = "/docs/assets"
ASSETS_DIR = Path(fastapi_offline.__file__).with_name("static")


def add_docs(app: FastAPI) -> None:
    """Serve the docs pages and their assets locally (the app must be made with docs_url=None, redoc_url=None)."""
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(DOCS_PATH, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon.png",
            oauth2_redirect_url=OAUTH2_REDIRECT_PATH,
        )

    @app.get(OAUTH2_REDIRECT_PATH, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_PATH, include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            with_google_fonts=False,
            redoc_js_url=f"{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS_PATH}/favicon.png",
        )
