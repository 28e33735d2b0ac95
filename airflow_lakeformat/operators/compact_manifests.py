"""``LakeformatCompactManifestsOperator``: manifest compaction of a Paimon or an Iceberg table, in the worker.

Manifest compaction reads and rewrites metadata only (manifests are small Avro files), so it always runs
in-process; there is no Spark job for it. A Paimon table gets Paimon's ``compact_manifest`` (``full``) or its
ordinary merge policy (``minor``) as one COMPACT snapshot, committed as the connection's commit user
(``<commit_user_prefix>-<dag_id>-<task_id>``); an Iceberg table gets Java's ``RewriteManifests`` (``full``)
or its commit-time merge (``minor``) as one ``replace`` snapshot whose summary names the same commit user
(``lakeformat.commit-user``, as the Iceberg appends of the commit and write operators do). Nothing is
committed when the merge changes nothing; the table's maintenance lock is held while it runs (dry runs
excepted).

Example:
    >>> LakeformatCompactManifestsOperator(task_id="compact_manifests", table="db.events", mode="full")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.operators.base import LakeTable

MODES = ("full", "minor")


class LakeformatCompactManifestsOperator(LakeformatMaintenanceOperator):
    """Compact the manifests of the table's latest snapshot (Iceberg: the head of ``main``).

    :param mode: ``"full"`` merges everything (Paimon also drops DELETE entries with the files they delete;
        Iceberg clusters the live entries by partition); ``"minor"`` applies the table's ordinary merge
        policy. Templated.
    :param dry_run: report what the merge would do, commit nothing. Templated.

    The XCom result is the core's manifest compaction JSON (``operation: compact-manifests``, ``table``,
    ``format``, ``dryRun``, ``mode``, ``merge``, ``snapshotId``, manifests and bytes before and after) plus
    ``execution``.
    """

    template_fields: Sequence[str] = (*LakeformatMaintenanceOperator.template_fields, "mode")
    operation = "compact-manifests"

    def __init__(self, *, mode: str = "full", **kwargs: Any) -> None:
        kwargs.setdefault("execution", "local")
        super().__init__(**kwargs)
        if "{{" not in mode and mode not in MODES:
            raise ValueError(f"mode must be 'full' or 'minor', not {mode!r}")
        self.mode = mode

    def check_table(self, table: LakeTable) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be 'full' or 'minor', not {self.mode!r}")

    def run_local(self, context: Context, table: LakeTable) -> dict[str, Any]:
        mode: Literal["full", "minor"] = "full" if self.mode == "full" else "minor"
        return table.maintenance.compact_manifests(
            mode, dry_run=self.is_dry_run, commit_user=self.task_commit_user(context)
        ).to_json()
