"""The Airflow 3 plugin behind the UI's "Table health" page: a FastAPI app and a nav entry.

Airflow's api-server mounts every plugin's ``fastapi_apps`` under their ``url_prefix`` (here
:data:`URL_PREFIX`, ``/lakeformat``; the routes are in ``health_app.py``), and the UI shows each
``external_views`` entry with ``destination`` ``"nav"`` in its navigation, the ``href`` framed in the UI's
page ``/plugin/<url_route>``.

Airflow also loads plugins in the scheduler, the triggerer and every task process (for macros and
listeners), so this module stays light: the mounted app is a :class:`LazyApp` that builds the FastAPI app
(and imports the api-server's security code, seconds of imports) on its first request, in the api-server.

The provider registers the plugin both ways providers do: the provider info's ``plugins`` entry (loaded when
providers are discovered eagerly) and the ``airflow.plugins`` entry point (loaded otherwise); the plugins
manager keeps one of the two, by name.

Example:
    >>> LakeformatHealthPlugin.external_views[0]["href"]
    '/lakeformat/'
"""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

PLUGIN_NAME = "lakeformat_health"
URL_PREFIX = "/lakeformat"
URL_ROUTE = "lakeformat-health"
NAV_NAME = "Table health"


class LazyApp:
    """An ASGI app that builds ``health_app.create_app()`` when it first serves a request."""

    def __init__(self) -> None:
        self._app: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            from airflow_lakeformat.plugins.health_app import create_app

            self._app = create_app()
        await self._app(scope, receive, send)


# What the plugin adds: the app, mounted by the api-server, and the nav entry that frames its page.
FASTAPI_APPS: list[dict[str, Any]] = [
    {"app": LazyApp(), "url_prefix": URL_PREFIX, "name": "Lakeformat table health"}
]
# No icon of its own: the UI's default plugin icon follows the nav's colours (a data-URI image cannot).
EXTERNAL_VIEWS: list[dict[str, Any]] = [
    {
        "name": NAV_NAME,
        "href": f"{URL_PREFIX}/",
        "destination": "nav",
        "url_route": URL_ROUTE,
    }
]


class LakeformatHealthPlugin(AirflowPlugin):
    """Adds the "Table health" page (FastAPI app + nav entry) to the Airflow 3 UI."""

    name = PLUGIN_NAME
    fastapi_apps = FASTAPI_APPS
    external_views = EXTERNAL_VIEWS
