"""Test DAG: every Lakeformat operator in one run, for the OpenLineage tests (tests/airflow/test_openlineage.py).

write -> commit (of files a task staged) -> compact data -> compact manifests -> expire -> remove orphans,
all on the table named by ``params.table``; the maintenance steps dry-run when ``params.dry_run``.

The operators record their lineage in ``execute()`` once ``operators/base.py`` mixes
``LakeformatLineageMixin`` in. Until then :func:`with_lineage` returns a subclass that records the same
attributes from the real result, so these DAGs test the mixin through the real operators either way.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, Context, task

from airflow_lakeformat.operators.commit import LakeformatCommitOperator, entries_to_xcom
from airflow_lakeformat.operators.compact_data import LakeformatCompactDataOperator
from airflow_lakeformat.operators.compact_manifests import LakeformatCompactManifestsOperator
from airflow_lakeformat.operators.expire_snapshots import LakeformatExpireSnapshotsOperator
from airflow_lakeformat.operators.lineage import LakeformatLineageMixin
from airflow_lakeformat.operators.remove_orphan_files import LakeformatRemoveOrphanFilesOperator
from airflow_lakeformat.operators.write import LakeformatWriteOperator


def with_lineage(cls: type[Any]) -> type[Any]:
    """``cls`` itself once it has the mixin; else ``cls`` plus the mixin, recording what execute() returned."""
    if issubclass(cls, LakeformatLineageMixin):
        return cls

    class Recorded(cls, LakeformatLineageMixin):  # type: ignore[misc, valid-type]
        def execute(self, context: Context) -> Any:
            result = super().execute(context)
            self._lineage_result = result
            self._lineage_table_uri = result.get("table")
            source = getattr(self, "source", None)
            if source:
                self._lineage_inputs = [source]
            return result

    Recorded.__name__ = Recorded.__qualname__ = cls.__name__
    return Recorded


Write = with_lineage(LakeformatWriteOperator)
Commit = with_lineage(LakeformatCommitOperator)
CompactData = with_lineage(LakeformatCompactDataOperator)
CompactManifests = with_lineage(LakeformatCompactManifestsOperator)
Expire = with_lineage(LakeformatExpireSnapshotsOperator)
RemoveOrphans = with_lineage(LakeformatRemoveOrphanFilesOperator)

PARAMS = {"table": "db.events", "source": "", "dry_run": True}


@task
def stage(table_name: str) -> list[dict[str, Any]]:
    """Write 2 rows into the table's layout without committing; hand over their entries."""
    import pyarrow as pa

    from airflow_lakeformat.core.paimon.write.data_files import write_data_files
    from airflow_lakeformat.hooks.lakeformat import LakeformatHook

    table = LakeformatHook().open_table(table_name)
    return entries_to_xcom(write_data_files(table, pa.table({"dt": ["2024-01-01"] * 2, "v": [7, 8]})))


with DAG("lakeformat_test_openlineage", schedule=None, params=PARAMS) as lineage_dag:
    table = "{{ params.table }}"
    dry_run = "{{ params.dry_run }}"
    write = Write(task_id="write", table=table, source="{{ params.source }}", emit_asset=False)
    staged = stage(table)
    commit = Commit(task_id="commit", table=table, files=staged, emit_asset=False)
    compact_data = CompactData(
        task_id="compact_data", table=table, dry_run=dry_run, execution="local", min_file_count=2
    )
    compact_manifests = CompactManifests(task_id="compact_manifests", table=table, dry_run=dry_run)
    expire = Expire(
        task_id="expire",
        table=table,
        dry_run=dry_run,
        execution="local",
        retain_min=1,
        older_than=timedelta(0),
    )
    remove_orphans = RemoveOrphans(task_id="remove_orphans", table=table, dry_run=dry_run, execution="local")
    write >> staged
    commit >> compact_data >> compact_manifests >> expire >> remove_orphans

DAGS = {"lineage": lineage_dag}
