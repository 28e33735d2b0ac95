"""The custom OpenLineage facet of Lakeformat maintenance: what expiry, orphan cleanup or compaction did.

:class:`LakeformatMaintenanceDatasetFacet` is an attrs class on the OpenLineage client's ``DatasetFacet``,
defined the way the client defines its own facets: camelCase fields, ``_get_schema()`` returning the
schema URL (``$id`` plus a JSON pointer into ``$defs``). The JSON Schema ships next to this module
(``lakeformat-maintenance-dataset-facet.json``; :func:`maintenance_facet_schema` loads it). The operators
attach it under ``lakeformatMaintenance`` to the table's dataset
(:mod:`airflow_lakeformat.operators.lineage`).

This module imports the OpenLineage client at import time, so nothing in the provider imports it at
module level: ``LakeformatLineageMixin.get_openlineage_facets_on_complete`` imports it when called (by
the OpenLineage provider, which brings the client).

Example:
    >>> from openlineage.client.serde import Serde
    >>> facet = LakeformatMaintenanceDatasetFacet(operation="expire-snapshots", format="paimon", dryRun=True,
    ...                                           snapshotsExpired=3, filesDeleted={"data-file": 2})
    >>> Serde.to_dict(facet)["filesDeleted"]
    {'data-file': 2}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attr
from openlineage.client.facet_v2 import DatasetFacet

SCHEMA_FILE = Path(__file__).with_name("lakeformat-maintenance-dataset-facet.json")
SCHEMA_ID = "urn:airflow-lakeformat:openlineage:facets:1-0-0:LakeformatMaintenanceDatasetFacet.json"
SCHEMA_URL = SCHEMA_ID + "#/$defs/LakeformatMaintenanceDatasetFacet"


def maintenance_facet_schema() -> dict[str, Any]:
    """The facet's JSON Schema (draft 2020-12), as shipped with the package."""
    return dict(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))


@attr.define(kw_only=True)
class LakeformatMaintenanceDatasetFacet(DatasetFacet):
    """What a maintenance operation removed or rewrote in a Paimon or Iceberg table.

    In a dry run (``dryRun``) the counts say what the operation would have done. Fields an operation
    does not have stay None (the OpenLineage serializer leaves them out).
    """

    operation: str
    """expire-snapshots, remove-orphan-files, compact-manifests or compact-data"""
    dryRun: bool = False
    format: str | None = None
    """paimon or iceberg"""
    table: str | None = None
    execution: str | None = None
    snapshotId: int | None = None
    """the snapshot the operation committed, if any"""

    # expiry and orphan cleanup
    snapshotsExpired: int | None = None
    refsRemoved: list[str] | None = None
    orphans: int | None = None
    filesDeleted: dict[str, int] | None = None
    """files deleted (dry run: to delete) by kind: data-file, manifest, manifest-list, snapshot, ..."""
    bytesDeleted: dict[str, int] | None = None
    bytesFreed: int | None = None
    deleteFailures: int | None = None

    # manifest compaction
    manifestsBefore: int | None = None
    manifestsAfter: int | None = None
    manifestsRewritten: int | None = None
    manifestBytesBefore: int | None = None
    manifestBytesAfter: int | None = None

    # data compaction
    filesRewritten: int | None = None
    filesWritten: int | None = None
    bytesRewritten: int | None = None
    bytesWritten: int | None = None
    rowsRewritten: int | None = None

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL
