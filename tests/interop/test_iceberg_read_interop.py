"""Java writes, we read: ``lakeformat files --json`` equals Java Iceberg 1.10.2's live files at every
snapshot and every ref of every table the oracle built (v1; v2 copy-on-write; v2 merge-on-read with
position deletes; v1 upgraded to v2; three partition specs with renamed columns; tags and branches with
their own retention; 40+ commits; v3 with deletion vectors, read-only).

Java's side is the build's baseline, computed by Java's own manifest readers in the build's Spark session
(``tests/support/java_iceberg.py``); ours goes through the CLI, the way a user sees it.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from tests.support.java_iceberg import SCENARIOS, JavaIcebergWarehouse
from tests.unit.test_cli import run

pytestmark = [pytest.mark.interop, pytest.mark.slow]

CONTENT = {0: "data", 1: "position-deletes", 2: "equality-deletes"}


def java_files(files: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    return Counter(
        (CONTENT[f["content"]], f["file_path"], f["file_format"].lower(), f["spec_id"], f["record_count"],
         f["file_size_in_bytes"])
        for f in files
    )  # fmt: skip


def our_files(table_path: str, *selector: str) -> tuple[dict[str, Any], Counter[tuple[Any, ...]]]:
    code, out, err = run("files", table_path, *selector, "--json")
    assert code == 0, err
    document = json.loads(out)
    return document, Counter(
        (f["content"], f["path"], f["fileFormat"].lower(), f["specId"], f["recordCount"], f["fileSize"])
        for f in document["files"]
    )


@pytest.mark.parametrize("name", SCENARIOS)
def test_files_at_every_snapshot_and_ref_equal_javas(
    java_iceberg_warehouse: JavaIcebergWarehouse, name: str
) -> None:
    table = java_iceberg_warehouse.tables[name]
    path = table["path"]
    baseline = java_iceberg_warehouse.baseline[name]["files"]
    snapshots = baseline["snapshots"]
    assert snapshots, name
    for snapshot_id, files in snapshots.items():
        document, ours = our_files(path, "--snapshot", snapshot_id)
        assert document["format"] == "iceberg" and document["snapshot"] == int(snapshot_id)
        assert ours == java_files(files), f"{name} at snapshot {snapshot_id}"
    for ref, view in baseline["refs"].items():
        _, ours = our_files(path, "--ref", ref)
        assert ours == java_files(view["files"]), f"{name} at ref {ref}"
    # The current snapshot through the table's own metadata file (read-only access) agrees too.
    _, current = our_files(table["metadata_location"])
    assert current == java_files(snapshots[str(baseline["current_snapshot_id"])])
