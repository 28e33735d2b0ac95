"""Maintenance that runs only what each table needs: health mapped over the tables, then per table exactly the
operations its health recommends, then a summary of what ran and what it changed.

Tasks: ``resolve_tables`` (the ``tables`` Param, and every table of the ``namespace`` Param: the connection's
Iceberg catalog namespace and the warehouse database ``<namespace>.db``) -> ``health`` (``LakeformatHealthOperator``
mapped over the tables: metadata only, the health document in XCom) -> ``maintain`` (mapped over (table, document)
pairs: the recommended operations in the recommendations' order, with their arguments, under the table's
maintenance lock; a healthy table runs nothing and takes no lock) -> ``summary`` (``{table: {"score", "ran",
"changes"}}``, and a readable table in its log). The steps are ``airflow_lakeformat/operators/auto_maintenance.py``.

Params (the trigger form): ``conn_id`` (default ``lakeformat_default``), ``tables`` (a list of URIs, ``db.table``
names under the connection's warehouse or ``namespace.table`` of its catalog) and ``namespace``. With neither
tables nor a namespace, the run takes ``LAKEFORMAT_AUTO_MAINTENANCE_TABLES`` (comma-separated; default the demo
table, ``LAKEFORMAT_DEMO_TABLE`` or ``demo.events``).

Settings from the environment (the file parses without a connection or storage): ``LAKEFORMAT_CONN_ID``
(the ``conn_id`` default), ``LAKEFORMAT_HEALTH_POLICY_VARIABLE`` (an Airflow Variable holding a health policy,
YAML or JSON; default none: each table's ``lakeformat.health.*`` properties and the defaults) and
``LAKEFORMAT_AUTO_MAINTENANCE_ORPHANS`` (``true``: health also lists each table's location for orphan files, so
``remove_orphan_files`` can be recommended; default ``false``).

The DAG starts paused: it deletes files (snapshot expiry, orphan cleanup), so it is turned on deliberately.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_lakeformat.operators.health import LakeformatHealthOperator

DEFAULT_TABLE = os.environ.get("LAKEFORMAT_DEMO_TABLE") or "demo.events"
DEFAULT_TABLES = [
    name.strip()
    for name in (os.environ.get("LAKEFORMAT_AUTO_MAINTENANCE_TABLES") or DEFAULT_TABLE).split(",")
    if name.strip()
]
CONN_ID = os.environ.get("LAKEFORMAT_CONN_ID", "lakeformat_default")
POLICY_VARIABLE = os.environ.get("LAKEFORMAT_HEALTH_POLICY_VARIABLE") or None
ORPHANS = os.environ.get("LAKEFORMAT_AUTO_MAINTENANCE_ORPHANS", "false")

DOC_MD = f"""
### Automatic maintenance: only what each table needs

1. `resolve_tables`: the *Tables* list plus every table of *Namespace* (with neither: `{", ".join(DEFAULT_TABLES)}`).
2. `health` (one mapped task per table): score, measures and recommendations from the table's metadata.
3. `maintain` (one per table): runs exactly the recommended operations (`compact_data`, `compact_deletes`,
   `compact_manifests`, `expire_snapshots`, `remove_orphan_files`, `expire_partitions`), in the recommended order,
   under the table's maintenance lock. **A healthy table runs nothing.**
4. `summary`: per table its score, the operations that ran and what they changed (XCom, and a table in the log).

**It deletes files** (snapshot expiry, orphan cleanup) when health recommends it.

**Connection**: the *Connection* param (default `{CONN_ID}`, from `LAKEFORMAT_CONN_ID`), type `lakeformat`: its
host is the warehouse (`s3://warehouse/wh`); a `db.table` name and a namespace's `<namespace>.db` are under it,
and `namespace.table` names a table of its Iceberg catalog when it has one.

**Environment** (read when the file is parsed): `LAKEFORMAT_CONN_ID`, `LAKEFORMAT_AUTO_MAINTENANCE_TABLES`
(the tables when the form gives none), `LAKEFORMAT_HEALTH_POLICY_VARIABLE` (an Airflow Variable holding a health
policy; now `{POLICY_VARIABLE or "none: table properties and defaults"}`), `LAKEFORMAT_AUTO_MAINTENANCE_ORPHANS`
(`true`: health also looks for orphan files; now `{ORPHANS}`).

**Paused**: this DAG always starts paused, even where Airflow unpauses new DAGs: unpause it once its tables
exist, with the toggle next to its name or `airflow dags unpause lakeformat_auto_maintenance`. See
`docs/airflow.md`, "Automatic maintenance".
"""

with DAG(
    dag_id="lakeformat_auto_maintenance",
    description="Assess every table's health and run only the maintenance it recommends",
    schedule="@daily",
    doc_md=DOC_MD,
    catchup=False,
    # It deletes files: turned on deliberately, in the UI.
    is_paused_upon_creation=True,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5)},
    params={
        "conn_id": Param(
            CONN_ID,
            type="string",
            minLength=1,
            title="Connection",
            description="The lakeformat connection: its warehouse and, if it names one, its Iceberg catalog.",
        ),
        "tables": Param(
            None,
            type=["null", "array"],
            items={"type": "string"},
            title="Tables",
            description=(
                "Table URIs, db.table names under the connection's warehouse, or namespace.table of its "
                f"catalog. Empty with no namespace: {', '.join(DEFAULT_TABLES)}."
            ),
        ),
        "namespace": Param(
            None,
            type=["null", "string"],
            title="Namespace",
            description="Also every table of this catalog namespace (and of the warehouse's <namespace>.db).",
        ),
    },
    tags=["lakeformat", "maintenance", "health"],
) as dag:

    @task(retries=0)
    def resolve_tables(params: dict[str, Any] | None = None) -> list[str]:
        """The tables to assess: the Param's list and the namespace's tables (the default list with neither)."""
        from airflow_lakeformat.operators.auto_maintenance import resolve_tables, table_names

        params = params or {}
        tables, namespace = params.get("tables"), params.get("namespace")
        if not table_names(tables) and not (namespace or "").strip():
            tables = DEFAULT_TABLES
        return resolve_tables(params["conn_id"], tables, namespace)

    tables = resolve_tables()
    health = LakeformatHealthOperator.partial(
        task_id="health",
        conn_id="{{ params.conn_id }}",
        orphans=ORPHANS,
        policy_variable=POLICY_VARIABLE,
    ).expand(table=tables)

    @task(max_active_tis_per_dagrun=4)
    def maintain(pair: tuple[str, dict[str, Any]], **context: Any) -> dict[str, Any]:
        """Run what the table's health recommends, nothing else, under its maintenance lock."""
        from airflow_lakeformat.operators.auto_maintenance import maintain_table

        table, document = pair
        return maintain_table(
            context["params"]["conn_id"], table, document, context, lock_wait=timedelta(minutes=30)
        )

    @task
    def summary(outcomes: list[dict[str, Any]]) -> dict[str, Any]:
        """Per table: its score, what ran and what it changed; logged as a table."""
        from airflow_lakeformat.operators.auto_maintenance import log, summarize_runs

        result, text = summarize_runs(outcomes)
        log.info("Automatic maintenance:\n%s", text)
        return result

    summary(maintain.expand(pair=tables.zip(health.output)))
