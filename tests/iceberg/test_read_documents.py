"""files/snapshots/manifests documents against pyiceberg's own answers, at every snapshot and ref.

The scenario (tests/iceberg/scenarios.py) is built by pyiceberg in a SQL catalog and in the Hadoop
layout (committed through our catalog), format v1 and v2: identity/day/bucket partitions, spec and
schema evolution, copy-on-write delete and overwrite, tags and branches, and (v2) delete manifests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_lakeformat.core.errors import SnapshotNotFoundError, TagNotFoundError
from airflow_lakeformat.core.iceberg.metadata.files import files_document
from airflow_lakeformat.core.iceberg.metadata.live_files import PyIcebergDecoder, live_files
from airflow_lakeformat.core.iceberg.metadata.manifest_decode import FastavroDecoder
from airflow_lakeformat.core.iceberg.metadata.manifests import manifests_document
from airflow_lakeformat.core.iceberg.metadata.snapshots import snapshots_document
from tests.iceberg import helpers
from tests.iceberg.scenarios import Scenario, build

KINDS = [("sql", 1), ("sql", 2), ("hadoop", 1), ("hadoop", 2)]


@pytest.fixture(scope="module", params=KINDS, ids=[f"{k}-v{v}" for k, v in KINDS])
def scenario(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    kind, version = request.param
    return build(kind, version, tmp_path_factory.mktemp(f"{kind}{version}"))


def all_points(sc: Scenario) -> list[tuple[str, int]]:
    """Every snapshot of the metadata plus the head of every ref."""
    metadata = sc.table.metadata
    points = [(f"snapshot {s.snapshot_id}", s.snapshot_id) for s in metadata.snapshots]
    points += [(f"ref {name}", ref.snapshot_id) for name, ref in metadata.refs.items()]
    return points


def test_scenario_has_the_history_it_claims(scenario: Scenario) -> None:
    metadata = scenario.table.metadata
    assert {"main", "t1", "b1"} <= set(metadata.refs)
    assert len(metadata.partition_specs) == 3
    assert metadata.schema().find_field(3).name == "name"  # renamed from "s"
    operations = {s.summary.operation.value for s in metadata.snapshots if s.summary}
    assert {"append", "overwrite", "delete"} <= operations


def test_files_document_equals_pyiceberg_files_and_scan_at_every_snapshot_and_ref(scenario: Scenario) -> None:
    table = scenario.table
    pyt = table.table
    for label, snapshot_id in all_points(scenario):
        doc = files_document(table, snapshot_id=snapshot_id)
        assert doc["snapshot"] == snapshot_id
        ours = helpers.document_files(doc)
        theirs = helpers.align_partitions(ours, helpers.pyiceberg_files(pyt, snapshot_id))
        assert ours == theirs, label
        if not any(f["content"] == "equality-deletes" for f in doc["files"]):  # pyiceberg cannot plan those
            data_paths, delete_paths = helpers.pyiceberg_scan_paths(pyt, snapshot_id)
            assert {f["path"] for f in doc["files"] if f["content"] == "data"} == data_paths, label
            assert delete_paths == {f["path"] for f in doc["files"] if f["content"] == "position-deletes"}, (
                label
            )
        sequence_numbers = helpers.pyiceberg_sequence_numbers(pyt, snapshot_id)
        assert {
            f["path"]: (f["dataSequenceNumber"], f["fileSequenceNumber"]) for f in doc["files"]
        } == sequence_numbers, label
        assert doc["files"] == sorted(
            doc["files"], key=lambda f: (helpers.CONTENT_IDS[f["content"]], f["path"])
        )


def test_ref_and_snapshot_selection(scenario: Scenario) -> None:
    table = scenario.table
    first = scenario.snapshots[0]
    assert files_document(table, ref="t1")["files"] == files_document(table, snapshot_id=first)["files"]
    branch = files_document(table, ref="b1")
    assert branch["snapshot"] == table.metadata.refs["b1"].snapshot_id != first
    assert len(branch["files"]) == len(files_document(table, snapshot_id=first)["files"]) + 1
    assert files_document(table)["snapshot"] == table.metadata.current_snapshot_id
    with pytest.raises(TagNotFoundError, match="nope"):
        files_document(table, ref="nope")
    with pytest.raises(SnapshotNotFoundError, match="12345"):
        files_document(table, snapshot_id=12345)


def test_fastavro_and_pyiceberg_decoders_agree(scenario: Scenario) -> None:
    table = scenario.table
    for label, snapshot_id in all_points(scenario):
        snapshot = table.snapshot(snapshot_id)
        assert snapshot is not None
        fast = live_files(table, snapshot, FastavroDecoder())
        reference = live_files(table, snapshot, PyIcebergDecoder())
        assert fast == reference, label
        assert fast or label.startswith("snapshot"), label  # overwrite's first (delete-all) snapshot is empty


def test_delete_files_are_listed_with_their_content(scenario: Scenario) -> None:
    doc = files_document(scenario.table)
    contents = sorted(f["content"] for f in doc["files"] if f["content"] != "data")
    if scenario.format_version == 1:
        assert contents == []
    else:
        assert contents == ["equality-deletes", "position-deletes"]
        by_content = {f["content"]: f for f in doc["files"]}
        metadata = scenario.table.metadata
        for content, snapshot_id in (("position-deletes", -2), ("equality-deletes", -1)):
            added_by = metadata.snapshot_by_id(scenario.snapshots[snapshot_id])
            assert added_by is not None  # each delete file inherits the sequence number of its commit
            assert by_content[content]["dataSequenceNumber"] == added_by.sequence_number
            assert by_content[content]["fileSequenceNumber"] == added_by.sequence_number


def test_snapshots_document_equals_metadata(scenario: Scenario) -> None:
    table = scenario.table
    doc = snapshots_document(table)
    pyt_rows = {r["snapshot_id"]: r for r in table.table.inspect.snapshots().to_pylist()}
    assert [s["id"] for s in doc["snapshots"]] and {s["id"] for s in doc["snapshots"]} == set(pyt_rows)
    for row in doc["snapshots"]:
        theirs = pyt_rows[row["id"]]
        assert row["parentId"] == theirs["parent_id"]
        assert row["operation"] == theirs["operation"]
        assert row["manifestList"] == theirs["manifest_list"]
        assert row["summary"] == {"operation": theirs["operation"], **dict(theirs["summary"])}
        assert row["timestampMs"] == int(theirs["committed_at"].timestamp() * 1000)
    refs = {r["name"]: r for r in table.table.inspect.refs().to_pylist()}
    assert set(doc["refs"]) == set(refs)
    for name, ref in doc["refs"].items():
        assert ref["snapshotId"] == refs[name]["snapshot_id"]
        assert ref["type"] == refs[name]["type"].lower()
    assert doc["refs"]["t1"]["type"] == "tag" and doc["refs"]["b1"]["type"] == "branch"
    assert doc["currentSnapshotId"] == table.metadata.current_snapshot_id == doc["refs"]["main"]["snapshotId"]


def test_manifests_document_equals_pyiceberg_inspect_manifests(scenario: Scenario) -> None:
    table = scenario.table
    doc = manifests_document(table)
    theirs = {r["path"]: r for r in table.table.inspect.manifests().to_pylist()}
    assert {m["path"] for m in doc["manifests"]} == set(theirs)
    for m in doc["manifests"]:
        row = theirs[m["path"]]
        assert m["fileSize"] == row["length"]
        assert m["specId"] == row["partition_spec_id"]
        assert m["addedSnapshotId"] == row["added_snapshot_id"]
        assert m["content"] == ("deletes" if row["content"] == 1 else "data")
        assert m["addedFilesCount"] == row["added_data_files_count"] + row["added_delete_files_count"]
        assert (
            m["existingFilesCount"] == row["existing_data_files_count"] + row["existing_delete_files_count"]
        )
    live = files_document(table)["files"]
    assert sum((m["addedFilesCount"] or 0) + (m["existingFilesCount"] or 0) for m in doc["manifests"]) == len(
        live
    )


def test_empty_table_documents(tmp_path: Path) -> None:
    from tests.iceberg.scenarios import create_table

    table = create_table("hadoop", 2, tmp_path)
    assert files_document(table) == {"table": table.name, "format": "iceberg", "snapshot": None, "files": []}
    assert manifests_document(table)["manifests"] == []
    doc = snapshots_document(table)
    assert doc["snapshots"] == [] and doc["currentSnapshotId"] is None and doc["refs"] == {}
