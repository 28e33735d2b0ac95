"""The custom OpenLineage facet of a table's health: score, measures and the recommended operations.

:class:`LakeformatHealthDatasetFacet` is an attrs class on the OpenLineage client's ``DatasetFacet``, defined as
the client defines its own facets (and as ``operators/lineage_facets.py`` defines the maintenance facet):
camelCase fields, ``_get_schema()`` returning the schema URL (``$id`` plus a JSON pointer into ``$defs``). The JSON
Schema ships next to this module (``lakeformat-health-dataset-facet.json``; :func:`health_facet_schema` loads
it). ``LakeformatHealthOperator`` (``operators/health.py``) attaches it under ``lakeformatHealth`` to the table's
input dataset; its fields come from ``operators/health.py``'s ``health_facet_fields``.

This module imports the OpenLineage client at import time: only the operator's
``get_openlineage_facets_on_complete`` imports it, when the OpenLineage provider calls that method.

Example:
    >>> from openlineage.client.serde import Serde
    >>> facet = LakeformatHealthDatasetFacet(score=60, format="paimon", dataFiles=5, smallFiles=5,
    ...     recommendations=[{"operation": "compact_data", "metric": "smallFilesPerPartition", "value": 5,
    ...                       "threshold": 5}])
    >>> Serde.to_dict(facet)["score"]
    60
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attr
from openlineage.client.facet_v2 import DatasetFacet

SCHEMA_FILE = Path(__file__).with_name("lakeformat-health-dataset-facet.json")
SCHEMA_ID = "urn:airflow-lakeformat:openlineage:facets:1-0-0:LakeformatHealthDatasetFacet.json"
SCHEMA_URL = SCHEMA_ID + "#/$defs/LakeformatHealthDatasetFacet"


def health_facet_schema() -> dict[str, Any]:
    """The facet's JSON Schema (draft 2020-12), as shipped with the package."""
    return dict(json.loads(SCHEMA_FILE.read_text(encoding="utf-8")))


@attr.define(kw_only=True)
class LakeformatHealthDatasetFacet(DatasetFacet):
    """A table's health when the task ran (``core/health/``): fields a document lacks stay None."""

    score: int
    """0-100; 100 with no penalty"""
    format: str | None = None
    """paimon or iceberg"""
    table: str | None = None
    snapshotId: int | None = None
    penalties: dict[str, float] | None = None
    """points taken off by measure: smallFiles, deleteLoad, positionDeletes"""
    dataFiles: int | None = None
    dataBytes: int | None = None
    smallFiles: int | None = None
    averageFileSize: int | None = None
    targetFileSize: int | None = None
    deleteFiles: int | None = None
    deleteRecords: int | None = None
    maxSortedRuns: int | None = None
    snapshots: int | None = None
    expirableSnapshots: int | None = None
    manifests: int | None = None
    smallManifests: int | None = None
    metadataBytes: int | None = None
    orphanFiles: int | None = None
    orphanBytes: int | None = None
    policy: str | None = None
    """where the health policy came from, when one applied"""
    recommendations: list[dict[str, Any]] = attr.field(factory=list)
    """operation, metric, value and threshold of each recommended operation, in the order to run them"""

    @staticmethod
    def _get_schema() -> str:
        return SCHEMA_URL
