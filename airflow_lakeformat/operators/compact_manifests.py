"""``LakeformatCompactManifestsOperator``: Paimon's manifest compaction, in the worker.

Manifest compaction reads and rewrites metadata only (manifests are small Avro files), so it always runs
in-process; there is no Spark job for it. It commits a COMPACT snapshot, or nothing when the merge
changes nothing, and holds the table's maintenance lock while it runs (dry runs excepted).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.core.paimon.table import Table

MODES = ("full", "minor")


class LakeformatCompactManifestsOperator(LakeformatMaintenanceOperator):
    """Compact the manifests of the table's latest snapshot.

    :param mode: ``"full"`` merges everything (and drops DELETE entries with the files they delete);
        ``"minor"`` applies the table's ordinary merge policy. Templated.
    :param dry_run: report what the merge would do, commit nothing. Templated.

    The XCom result is the core's ``ManifestCompactionResult`` JSON plus ``table`` and ``execution``.
    """

    template_fields: Sequence[str] = (*LakeformatMaintenanceOperator.template_fields, "mode")

    def __init__(self, *, mode: str = "full", **kwargs: Any) -> None:
        kwargs.setdefault("execution", "local")
        super().__init__(**kwargs)
        if "{{" not in mode and mode not in MODES:
            raise ValueError(f"mode must be 'full' or 'minor', not {mode!r}")
        self.mode = mode

    def run_local(self, context: Context, table: Table) -> dict[str, Any]:
        from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import compact_manifests

        if self.mode not in MODES:
            raise ValueError(f"mode must be 'full' or 'minor', not {self.mode!r}")
        result = compact_manifests(table, "full" if self.mode == "full" else "minor", dry_run=self.is_dry_run)
        return result.to_json()
