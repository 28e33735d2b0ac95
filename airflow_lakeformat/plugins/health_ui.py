"""The Airflow 3 plugin behind the UI's "Table health" page: a FastAPI app and a nav entry.

Airflow's api-server mounts every plugin's ``fastapi_apps`` under their ``url_prefix`` (here
:data:`URL_PREFIX`, ``/lakeformat``), and the UI shows each ``external_views`` entry with ``destination``
``"nav"`` in its navigation, the ``href`` framed in the UI's page ``/plugin/<url_route>``. The app's routes:

* ``GET /lakeformat/``: the page (``health_page.render_page`` over ``health_tables.collect_entries``;
  ``?refresh=1`` recomputes instead of using the 30-second cache);
* ``GET /lakeformat/health.json``: the same documents as JSON;
* ``GET /lakeformat/trigger?dag_id=&table=&conn_id=``: the manual-maintenance DAG's trigger form with the
  table filled in (Airflow 3.3's own trigger dialog cannot be opened prefilled from a URL; this form posts
  to Airflow's REST API, so the run is validated and authorised as the dialog's would be).

Every route needs a signed-in user allowed to read connections (Airflow's auth manager, from the session
cookie the UI sets), since the page shows what the connections hold.

The provider registers the plugin both ways providers do: the provider info's ``plugins`` entry (loaded when
providers are discovered eagerly) and the ``airflow.plugins`` entry point (loaded otherwise); the plugins
manager keeps one of the two, by name.

Example:
    >>> from fastapi.testclient import TestClient  # doctest: +SKIP
    >>> TestClient(create_app()).get("/").status_code  # with the auth dependency overridden  # doctest: +SKIP
    200
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.core_api.security import requires_access_connection
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, Query
from fastapi.responses import HTMLResponse, JSONResponse

from airflow_lakeformat.plugins.health_page import (
    MANUAL_MAINTENANCE_DAG,
    render_page,
    render_trigger_form,
)
from airflow_lakeformat.plugins.health_tables import collect_entries

PLUGIN_NAME = "lakeformat_health"
URL_PREFIX = "/lakeformat"
URL_ROUTE = "lakeformat-health"
NAV_NAME = "Table health"

# The dependency every route has (tests override it to run the app without an auth manager).
read_connections = requires_access_connection(method="GET")


def dag_params(dag_id: str) -> dict[str, dict[str, Any]] | None:
    """The Params of the serialized DAG ``dag_id`` (name -> value, schema, description), None if unknown."""
    from airflow.models.serialized_dag import SerializedDagModel

    dag = SerializedDagModel.get_dag(dag_id)
    if dag is None:
        return None
    params = dag.params
    return {name: dict(params.get_param(name).dump()) for name in params}


def create_app() -> FastAPI:
    """The plugin's FastAPI app (mounted at :data:`URL_PREFIX` by the api-server).

    Example:
        >>> sorted(r.path for r in create_app().routes if r.path in ("/", "/trigger"))  # doctest: +SKIP
        ['/', '/trigger']
    """
    app = FastAPI(title="Lakeformat table health", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/", response_class=HTMLResponse, dependencies=[Depends(read_connections)])
    def page(refresh: bool = False) -> HTMLResponse:
        return HTMLResponse(render_page(collect_entries(refresh=refresh)))

    @app.get("/health.json", dependencies=[Depends(read_connections)])
    def documents(refresh: bool = False) -> JSONResponse:
        entries = collect_entries(refresh=refresh)
        return JSONResponse(
            [
                {"conn_id": e.conn_id, "table": e.table, "health": e.document, "error": e.error}
                for e in entries
            ]
        )

    @app.get("/trigger", response_class=HTMLResponse, dependencies=[Depends(read_connections)])
    def trigger_form(
        table: str = Query(""),
        dag_id: str = Query(MANUAL_MAINTENANCE_DAG),
        conn_id: str = Query(""),
    ) -> HTMLResponse:
        prefill: dict[str, Any] = {"table": table}
        return HTMLResponse(render_trigger_form(dag_id, dag_params(dag_id), prefill))

    return app


# What the plugin adds: the app, mounted by the api-server, and the nav entry that frames its page.
FASTAPI_APPS: list[dict[str, Any]] = [
    {"app": create_app(), "url_prefix": URL_PREFIX, "name": "Lakeformat table health"}
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
