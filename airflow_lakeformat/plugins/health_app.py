"""The FastAPI app of the "Table health" page, mounted by Airflow's api-server at ``/lakeformat``.

Routes:

* ``GET /``: the page (``health_page.render_page`` over ``health_tables.collect_entries``; ``?refresh=1``
  recomputes instead of using the 30-second cache);
* ``GET /health.json``: the same documents as JSON;
* ``GET /trigger?dag_id=&table=&conn_id=``: the manual-maintenance DAG's trigger form with the table filled
  in (Airflow 3.3's own trigger dialog cannot be opened prefilled from a URL; this form posts to Airflow's
  REST API, so the run is validated and authorised as the dialog's would be). The Params are the serialized
  DAG's, read from the metadata database.

Every route needs a signed-in user allowed to read connections (Airflow's auth manager, from the session
cookie the UI sets), since the page shows what the connections hold. This module imports the api-server's
security code (seconds of imports): ``health_ui`` imports it only when the app first serves a request.

Example:
    >>> from fastapi.testclient import TestClient  # doctest: +SKIP
    >>> app = create_app(); app.dependency_overrides[read_connections] = lambda: None  # doctest: +SKIP
    >>> TestClient(app).get("/").status_code  # doctest: +SKIP
    200
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.core_api.security import requires_access_connection
from fastapi import Depends, FastAPI, Query
from fastapi.responses import HTMLResponse, JSONResponse

from airflow_lakeformat.plugins.health_page import (
    MANUAL_MAINTENANCE_DAG,
    render_page,
    render_trigger_form,
)
from airflow_lakeformat.plugins.health_tables import collect_entries

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
