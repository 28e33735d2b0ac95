"""``LakeformatHealthOperator``: what a Paimon or Iceberg table needs, as the health document in XCom.

The operator opens the table through the connection (``LakeformatHook``, the facade's ``open_table``) and calls
``table.health()`` (``core/health/``): measures read from the metadata only (no data file is read), a score from
0 to 100 and the recommended operations, each with the facade arguments that fix it. Its XCom return value is
the document ``lakeformat health --json`` prints (``core/health/model.py``), headed like every operator's
result by ``operation: "health"`` and ``dryRun: false`` (``operators/base.py``'s one result shape).

Policies (issue 28 point 3): ``policy`` (a YAML or JSON file path, its text, or a mapping) and
``policy_variable`` (the name of an Airflow Variable holding one) are read by
``hooks/health_policy.py``'s ``load_policy``; the table's health is then assessed with that policy. Without
either, the table's own properties (``lakeformat.health.*``) and the defaults apply.

OpenLineage: the table is the task's INPUT dataset (health only reads it), with the ``storage`` facet and the
custom dataset facet ``lakeformatHealth`` (``operators/health_facet.py``, schema
``lakeformat-health-dataset-facet.json``): score, penalties, files, deletes, snapshots, manifests and the
recommended operations. :func:`health_facet_fields` turns the document into the facet's fields.

Example:
    >>> LakeformatHealthOperator(task_id="health", table="db.events", orphans=True,
    ...                          policy_variable="lakeformat_health_policy")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.hooks.lakeformat import DEFAULT_CONN_ID
from airflow_lakeformat.operators.base import LakeformatBaseOperator
from airflow_lakeformat.operators.lineage import dataset_name
from airflow_lakeformat.operators.templated import as_bool, optional_duration

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage
    from airflow.sdk import Context

HEALTH_FACET = "lakeformatHealth"
HEALTH_OPERATION = "health"


def jsonable(value: Any) -> Any:
    """``value`` with every ``timedelta`` turned into Paimon's duration text (``"86400000 ms"``), recursively.

    Recommendation arguments may hold a ``timedelta`` (the orphan cleanup's ``older_than``); XCom and
    OpenLineage carry JSON, and :func:`airflow_lakeformat.operators.auto_maintenance.facade_arguments` reads the
    text back.

    Example:
        >>> jsonable({"dry_run": False, "older_than": timedelta(days=1)})
        {'dry_run': False, 'older_than': '86400000 ms'}
    """
    if isinstance(value, timedelta):
        return f"{int(value.total_seconds() * 1000)} ms"
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def health_facet_fields(document: Mapping[str, Any]) -> dict[str, Any]:
    """The ``lakeformatHealth`` facet's fields from a health document (read defensively: missing keys are None).

    Args:
        document: the operator's XCom document (``TableHealth.to_json()`` with the result head).

    Returns:
        The facet's keyword arguments: ``score``, ``format``, ``table``, ``snapshotId``, ``penalties``, the main
        measures, ``policy`` (the policy's source, when one applied) and ``recommendations`` (operation, metric,
        value, threshold of each).

    Example:
        >>> health_facet_fields({"score": 60, "format": "paimon", "files": {"dataFiles": 5, "smallFiles": 5},
        ...                      "recommendations": [{"operation": "compact_data", "metric": "smallFilesPerPartition",
        ...                                           "value": 5, "threshold": 5}]})["recommendations"]
        [{'operation': 'compact_data', 'metric': 'smallFilesPerPartition', 'value': 5, 'threshold': 5}]
    """

    def section(name: str) -> Mapping[str, Any]:
        value = document.get(name)
        return value if isinstance(value, Mapping) else {}

    files, deletes, snapshots, manifests = (
        section(n) for n in ("files", "deletes", "snapshots", "manifests")
    )
    orphans, policy = section("orphans"), section("policy")
    penalties = {str(k): float(v) for k, v in section("penalties").items() if _int(v) is not None}
    delete_records = [
        _int(deletes.get(k)) for k in ("positionDeleteRecords", "equalityDeleteRecords", "deleteRecords")
    ]
    recommendations = [
        {
            "operation": str(r.get("operation")),
            "metric": r.get("metric") if isinstance(r.get("metric"), str) else None,
            "value": r.get("value") if _int(r.get("value")) is not None else None,
            "threshold": r.get("threshold") if _int(r.get("threshold")) is not None else None,
        }
        for r in document.get("recommendations") or []
        if isinstance(r, Mapping)
    ]
    return {
        "score": _int(document.get("score")) or 0,
        "format": document.get("format") if isinstance(document.get("format"), str) else None,
        "table": document.get("table") if isinstance(document.get("table"), str) else None,
        "snapshotId": _int(document.get("snapshotId")),
        "penalties": penalties or None,
        "dataFiles": _int(files.get("dataFiles")),
        "dataBytes": _int(files.get("dataBytes")),
        "smallFiles": _int(files.get("smallFiles")),
        "averageFileSize": _int(files.get("averageFileSize")),
        "targetFileSize": _int(files.get("targetFileSize")),
        "deleteFiles": _int(deletes.get("deleteFiles")),
        "deleteRecords": sum(n for n in delete_records if n is not None) if deletes else None,
        "maxSortedRuns": _int(deletes.get("maxSortedRuns")),
        "snapshots": _int(snapshots.get("count")),
        "expirableSnapshots": _int(snapshots.get("expirable")),
        "manifests": _int(manifests.get("count")),
        "smallManifests": _int(manifests.get("small")),
        "metadataBytes": _int(document.get("metadataBytes")),
        "orphanFiles": _int(orphans.get("files")),
        "orphanBytes": _int(orphans.get("bytes")),
        "policy": str(policy["source"]) if policy.get("source") is not None else None,
        "recommendations": recommendations,
    }


def health_summary(document: Mapping[str, Any]) -> str:
    """One line for the task log: score, files, small files and the recommended operations (or healthy).

    Example:
        >>> health_summary({"table": "/wh/db.db/t", "format": "paimon", "score": 60,
        ...                 "files": {"dataFiles": 5, "smallFiles": 5}, "recommendations": [{"operation": "compact_data"}]})
        '/wh/db.db/t (paimon): score 60; 5 data files, 5 small; recommends compact_data'
    """
    files = document.get("files") or {}
    todo = ", ".join(str(r.get("operation")) for r in document.get("recommendations") or [])
    return (
        f"{document.get('table')} ({document.get('format')}): score {document.get('score')}; "
        f"{files.get('dataFiles')} data files, {files.get('smallFiles')} small; "
        f"recommends {todo or 'nothing (healthy)'}"
    )


class LakeformatHealthOperator(LakeformatBaseOperator):
    """Assess a table's health (metadata only) and return the health document.

    :param table: full table URI, ``db.table`` under the connection's warehouse, or ``namespace.table`` of the
        connection's Iceberg catalog. Templated.
    :param conn_id: the ``lakeformat`` connection (the same as ``lakeformat_conn_id``, the name the other
        operators use; give one of them). Templated.
    :param orphans: also run the orphan cleanup's dry run (lists the table's location: slower), so that
        ``remove_orphan_files`` can be recommended. Templated.
    :param orphan_older_than: the orphan dry run's age rule (default the format's: Paimon 1 day, Iceberg 3
        days). Templated.
    :param policy: a health policy: a YAML or JSON file path, its text, or a mapping (``hooks/health_policy.py``).
        Templated.
    :param policy_variable: the name of an Airflow Variable holding a policy (YAML or JSON). Templated.

    The XCom result is the health document (``lakeformat health --json``) with ``operation: "health"`` and
    ``dryRun: false`` first; recommendation arguments are JSON (a duration as ``"<n> ms"``).
    """

    template_fields: Sequence[str] = (
        *LakeformatBaseOperator.template_fields,
        "orphans",
        "orphan_older_than",
        "policy",
        "policy_variable",
    )
    ui_color = "#e3f1d8"
    operation = HEALTH_OPERATION

    def __init__(
        self,
        *,
        table: str,
        conn_id: str | None = None,
        orphans: bool | str = False,
        orphan_older_than: timedelta | str | None = None,
        policy: str | Mapping[str, Any] | None = None,
        policy_variable: str | None = None,
        **kwargs: Any,
    ) -> None:
        given = kwargs.get("lakeformat_conn_id")
        if conn_id is not None and given is not None and given != conn_id:
            raise ValueError(f"conn_id {conn_id!r} and lakeformat_conn_id {given!r} differ: give one of them")
        kwargs["lakeformat_conn_id"] = conn_id or given or DEFAULT_CONN_ID
        super().__init__(table=table, **kwargs)
        self.orphans = orphans
        self.orphan_older_than = orphan_older_than
        self.policy = policy
        self.policy_variable = policy_variable

    @property
    def conn_id(self) -> str:
        return self.lakeformat_conn_id

    def _policy(self) -> Any:
        """The policy to assess with, or None (neither given: the table's properties and the defaults)."""
        policy = self.policy if self.policy not in (None, "", "None") else None
        variable = self.policy_variable if self.policy_variable not in (None, "", "None") else None
        if policy is None and variable is None:
            return None
        from airflow_lakeformat.hooks.health_policy import load_policy

        return load_policy(policy, variable=variable)

    def run(self, context: Context, table_uri: str) -> dict[str, Any]:
        table = self.open_lake_table(table_uri)
        options: dict[str, Any] = {"orphans": as_bool(self.orphans, "orphans")}
        older_than = optional_duration(self.orphan_older_than, "orphan_older_than")
        if older_than is not None:
            options["orphan_older_than"] = older_than
        policy = self._policy()
        if policy is not None:
            options["policy"] = policy
        document: dict[str, Any] = jsonable(table.health(**options).to_json())
        return {**document, "table": table.uri, "format": table.format}

    def summarize(self, result: Mapping[str, Any]) -> str:
        return health_summary(result)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """The table as the input dataset, with the ``storage`` and ``lakeformatHealth`` facets.

        Args:
            task_instance: the finished task instance (unused: everything comes from ``execute()``).

        Returns:
            An ``OperatorLineage`` with the table as its one input (health reads, it writes nothing), or an empty
            one when ``execute()`` recorded no table location.
        """
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import InputDataset
        from openlineage.client.facet_v2 import storage_dataset

        from airflow_lakeformat.operators.health_facet import LakeformatHealthDatasetFacet

        location = self._lineage_table_location()
        result = self._lineage_result
        if location is None or not result:
            return OperatorLineage()
        facets: dict[str, Any] = {HEALTH_FACET: LakeformatHealthDatasetFacet(**health_facet_fields(result))}
        if isinstance(result.get("format"), str):
            facets["storage"] = storage_dataset.StorageDatasetFacet(storageLayer=result["format"])
        return OperatorLineage(inputs=[InputDataset(*dataset_name(location), facets=facets)])
