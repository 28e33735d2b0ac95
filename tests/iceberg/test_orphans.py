"""Iceberg orphan cleanup on local disk: what is found, what is kept, the guards and the CLI."""

from __future__ import annotations

import json
import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_lakeformat import open_table
from airflow_lakeformat.core.errors import MaintenanceRefusedError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.maintenance.orphan_plan import PrefixMismatchError, plan_orphan_cleanup
from airflow_lakeformat.core.iceberg.maintenance.orphans import execute_orphan_cleanup, remove_orphan_files
from airflow_lakeformat.core.iceberg.metadata.files import files_document
from airflow_lakeformat.core.iceberg.write.write import add_files
from airflow_lakeformat.core.maintenance.results import summary
from tests.iceberg.helpers import write_parquet
from tests.iceberg.orphan_support import (
    DAY,
    OLD_DAYS,
    PlantedTable,
    build_planted,
    files_under,
    plant,
    set_age,
)
from tests.iceberg.scenarios import build, rows
from tests.unit.test_cli import run


def live_paths(planted: PlantedTable) -> set[str]:
    """Every file the table's metadata references that lies under the table root."""
    table = open_path_table(str(planted.root))
    paths = {table.metadata_location}
    for snapshot in table.metadata.snapshots:
        paths.add(snapshot.manifest_list)
        paths |= {f["path"] for f in files_document(table, snapshot_id=snapshot.snapshot_id)["files"]}
    return {p.removeprefix("file:") for p in paths}


def orphan_paths(document: dict) -> set[str]:
    return set(document["orphanPaths"])


def test_dry_run_finds_exactly_the_old_orphans_and_a_real_run_deletes_them(tmp_path: Path) -> None:
    planted = build_planted(tmp_path)
    before = files_under(tmp_path)
    live = live_paths(planted)
    report = tmp_path / "dry.jsonl"

    dry = remove_orphan_files(planted.table, report=str(report))
    document = dry.to_json()
    assert orphan_paths(document) == planted.old_orphans
    assert document["orphans"] == len(planted.old_orphans)
    assert files_under(tmp_path) == before  # a dry run deletes nothing
    assert document["operation"] == "remove-orphan-files" and document["format"] == "iceberg"
    assert document["dryRun"] is True and document["hiddenSkipped"] == 3
    assert document["files"] == {"data-file": 3, "manifest": 1, "manifest-list": 1, "metadata-json": 3,
                                 "other-file": 1}  # fmt: skip
    assert document["tooRecent"] >= 2 and document["decisions"] and document["warnings"] == []
    assert dry.summary() == summary(document)
    lines = [json.loads(line) for line in report.read_text().splitlines()]
    assert {row["path"] for row in lines} == planted.old_orphans
    assert {row["action"] for row in lines} == {"would-delete"}
    assert all("not reachable" in row["reason"] and row["lastModified"] for row in lines)

    wet = remove_orphan_files(planted.table, dry_run=False, report=str(tmp_path / "wet.jsonl"))
    assert wet.to_json()["dryRun"] is False
    assert files_under(tmp_path) == before - planted.old_orphans
    assert live <= files_under(tmp_path)
    assert planted.fresh_orphans <= files_under(tmp_path) and planted.never <= files_under(tmp_path)
    deleted = [json.loads(line) for line in (tmp_path / "wet.jsonl").read_text().splitlines()]
    assert {row["path"] for row in deleted if row["action"] == "deleted"} == planted.old_orphans
    # The table reads as before, and a second run finds nothing.
    reopened = open_path_table(str(planted.root))
    assert sorted(reopened.table.scan().to_arrow().column("id").to_pylist()) == [0, 1, 10, 11, 20, 21, 30, 31]
    assert remove_orphan_files(reopened, dry_run=False).to_json()["orphans"] == 0


def test_every_snapshot_of_every_ref_keeps_its_files(tmp_path: Path) -> None:
    """Tags, branches, copy-on-write rewrites, an overwrite, three specs, delete files: nothing live goes."""
    scenario = build("hadoop", 2, tmp_path)
    root = tmp_path / "t"
    for directory, _, names in os.walk(root):
        for name in names:
            set_age(Path(directory) / name, OLD_DAYS)
    stray = plant(root / "data" / "stray.parquet", OLD_DAYS)
    before = files_under(root)
    result = remove_orphan_files(scenario.table, dry_run=False)
    assert orphan_paths(result.to_json()) == {str(stray)}
    assert files_under(root) == before - {str(stray)}
    table = open_path_table(str(root))
    for snapshot in table.metadata.snapshots:
        for f in files_document(table, snapshot_id=snapshot.snapshot_id)["files"]:
            assert os.path.exists(f["path"].removeprefix("file:")), f["path"]


def test_default_is_three_days_and_under_24_hours_needs_the_override(tmp_path: Path) -> None:
    planted = build_planted(tmp_path)
    two_days = plant(planted.root / "data" / "two-days.parquet", 2)
    two_hours = plant(planted.root / "data" / "two-hours.parquet", 2 / 24)
    assert str(two_days) not in orphan_paths(remove_orphan_files(planted.table).to_json())
    week = remove_orphan_files(planted.table, older_than=timedelta(days=1)).to_json()
    assert str(two_days) in orphan_paths(week) and str(two_hours) not in orphan_paths(week)

    with pytest.raises(MaintenanceRefusedError, match="under 24 h"):
        plan_orphan_cleanup(planted.table, older_than=timedelta(hours=1))
    code, _, err = run("remove-orphans", str(planted.root), "--older-than", "1 h", "--apply", "--json")
    assert code == 9 and "allow-short-older-than" in err
    assert two_hours.exists()

    short = remove_orphan_files(
        planted.table, dry_run=False, older_than=timedelta(hours=1), allow_short_older_than=True
    )
    assert {str(two_days), str(two_hours)} <= orphan_paths(short.to_json())
    assert not two_hours.exists() and not two_days.exists()
    with pytest.raises(MaintenanceRefusedError, match="negative"):
        plan_orphan_cleanup(planted.table, older_than=timedelta(hours=-1), allow_short_older_than=True)


def test_a_file_committed_between_listing_and_valid_set_is_kept(tmp_path: Path) -> None:
    """The valid set is read after the listing (and from a re-loaded table): a commit in between that
    registers an old, listed file makes it valid, never an orphan."""
    planted = build_planted(tmp_path)
    old_file = write_parquet(planted.root / "data" / "late.parquet", rows([99], "a", DAY))
    set_age(Path(old_file), OLD_DAYS)
    writer = open_path_table(str(planted.root))

    def commit_now(phase: str) -> None:
        if phase == "listed":
            add_files(writer, [old_file])

    plan = plan_orphan_cleanup(planted.table, on_phase=commit_now)
    assert old_file not in {r.path for r in plan.orphans}
    assert {r.path for r in plan.orphans} == planted.expected()


def test_a_commit_after_planning_is_caught_by_the_recheck(tmp_path: Path) -> None:
    planted = build_planted(tmp_path)
    old_file = write_parquet(planted.root / "data" / "late.parquet", rows([99], "a", DAY))
    set_age(Path(old_file), OLD_DAYS)
    facade = open_table(str(planted.root))
    plan = facade.maintenance.plan_remove_orphan_files()
    assert old_file in {r.path for r in plan.orphans}
    add_files(open_path_table(str(planted.root)), [old_file])  # another writer registers it

    result = facade.maintenance.remove_orphan_files(
        dry_run=False, plan=plan, report=str(tmp_path / "r.jsonl")
    )
    assert os.path.exists(old_file)
    assert result.to_json()["keptByRecheck"] == 1
    assert files_under(tmp_path) & planted.old_orphans == set()
    rows_ = {json.loads(x)["path"]: json.loads(x) for x in (tmp_path / "r.jsonl").read_text().splitlines()}
    assert rows_[old_file]["action"] == "kept" and "concurrent commit" in rows_[old_file]["reason"]
    table = open_path_table(str(planted.root))
    assert 99 in table.table.scan().to_arrow().column("id").to_pylist()


def test_a_writer_committing_between_delete_batches_loses_nothing(tmp_path: Path) -> None:
    """Batches of one file, one in flight at a time: after the first delete lands, a writer registers three
    planted old files; the re-check that runs before every later batch sees its snapshot and keeps them."""
    from airflow_lakeformat.core.maintenance.deletion import FileDeleter

    planted = build_planted(tmp_path)
    late = [
        write_parquet(planted.root / "data" / f"zz-late-{i}.parquet", rows([100 + i], "b", DAY))
        for i in range(3)
    ]
    for path in late:
        set_age(Path(path), OLD_DAYS)
    plan = plan_orphan_cleanup(planted.table)
    order = [r.path for r in plan.orphans]
    assert min(order.index(p) for p in late) >= 3  # a guard runs before at most two batches are in flight
    writer = open_path_table(str(planted.root))

    class CommitAfterFirstDelete:
        committed = False

        def start(self, task: str, total: int | None) -> None:
            pass

        def advance(self, count: int = 1) -> None:
            # Called by the deleter's worker once per deleted file (and with 0 by the guard's thread).
            if count and not self.committed:
                self.committed = True
                add_files(writer, late)

        def finish(self) -> None:
            pass

    deleter = FileDeleter(
        planted.table.io, dry_run=False, batch_size=1, concurrency=1, progress=CommitAfterFirstDelete()
    )
    expected = planted.expected()
    result = execute_orphan_cleanup(planted.table, plan, dry_run=False, deleter=deleter)
    assert all(os.path.exists(p) for p in late)
    assert result.to_json()["keptByRecheck"] == 3
    assert files_under(tmp_path) & expected == set()
    ids = open_path_table(str(planted.root)).table.scan().to_arrow().column("id").to_pylist()
    assert {100, 101, 102} <= set(ids)


def test_appends_running_during_a_real_cleanup_lose_nothing(tmp_path: Path) -> None:
    """A writer thread appends while the cleanup lists, reads the valid set and deletes: every file of every
    snapshot still exists afterwards and the rows are all there."""
    import threading

    from airflow_lakeformat.core.iceberg.write.write import append

    planted = build_planted(tmp_path)
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:
        table = open_path_table(str(planted.root))
        i = 0
        while not stop.is_set() and i < 40:
            append(table, rows([1000 + i], "w", DAY))
            written.append(1000 + i)
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(3):
            remove_orphan_files(open_path_table(str(planted.root)), dry_run=False)
    finally:
        stop.set()
        thread.join()
    table = open_path_table(str(planted.root))
    for snapshot in table.metadata.snapshots:
        assert os.path.exists(snapshot.manifest_list.removeprefix("file:"))
        for f in files_document(table, snapshot_id=snapshot.snapshot_id)["files"]:
            assert os.path.exists(f["path"].removeprefix("file:")), f["path"]
    ids = set(table.table.scan().to_arrow().column("id").to_pylist())
    assert set(written) <= ids and written


def test_prefix_mismatch_aborts_and_deletes_nothing(tmp_path: Path) -> None:
    """A listed file that the metadata references under another scheme is never an orphan: the run aborts
    (Java's PrefixMismatchMode.ERROR), or with ignore keeps it and cleans the rest."""
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    from airflow_lakeformat.core.iceberg.write.write import append_data_files

    planted = build_planted(tmp_path)
    local = write_parquet(planted.root / "data" / "elsewhere.parquet", rows([7], "a", DAY))
    set_age(Path(local), OLD_DAYS)
    spelled = f"hdfs://namenode:8020{local}"
    df = DataFile.from_args(
        content=DataFileContent.DATA, file_path=spelled, file_format=FileFormat.PARQUET,
        partition=Record("a"), record_count=1, file_size_in_bytes=os.path.getsize(local),
    )  # fmt: skip
    df.spec_id = planted.table.metadata.default_spec_id
    append_data_files(planted.table, [df])
    before = files_under(tmp_path)

    with pytest.raises(PrefixMismatchError, match="hdfs://namenode:8020") as caught:
        remove_orphan_files(planted.table, dry_run=False)
    assert caught.value.mismatches[0].actual == f"file:{local}"
    code, _, err = run("remove-orphans", str(planted.root), "--apply")
    assert code == 9 and "another scheme or authority" in err
    assert files_under(tmp_path) == before

    expected = planted.expected()
    ignored = remove_orphan_files(planted.table, dry_run=False, prefix_mismatch="ignore")
    assert os.path.exists(local)
    assert ignored.to_json()["prefixMismatches"] == [{"path": f"file:{local}", "valid": spelled}]
    assert ignored.to_json()["warnings"]
    assert files_under(tmp_path) == before - expected


def test_metadata_without_scheme_matches_a_listed_file_uri(tmp_path: Path) -> None:
    """``/abs/path`` in metadata has no scheme: it matches the listed ``file:/abs/path`` (Java's FileURI)."""
    planted = build_planted(tmp_path)
    assert not planted.table.metadata_location.startswith("file:")
    result = remove_orphan_files(planted.table).to_json()
    assert result["prefixMismatches"] == [] and orphan_paths(result) == planted.old_orphans


@pytest.mark.parametrize("damage", ["truncated-manifest-list", "missing-manifest", "garbage-metadata-json"])
def test_unreadable_metadata_is_a_typed_error_and_deletes_nothing(tmp_path: Path, damage: str) -> None:
    planted = build_planted(tmp_path)
    table = planted.table
    snapshot = table.metadata.snapshots[1]
    if damage == "truncated-manifest-list":
        path = Path(snapshot.manifest_list.removeprefix("file:"))
        path.write_bytes(path.read_bytes()[:40])
        expected, code_expected = "", 4
    elif damage == "missing-manifest":
        manifest = snapshot.manifests(table.table.io)[0].manifest_path
        path = Path(manifest.removeprefix("file:"))
        path.unlink()
        expected, code_expected = "does not exist", 4
    else:
        version = int(Path(table.metadata_location).name[1:].split(".")[0])
        path = planted.root / "metadata" / f"v{version + 1}.metadata.json"
        path.write_text('{"format-version": 2, "garbage": ')
        expected, code_expected = "not a valid table metadata JSON", 4
    before = files_under(tmp_path)
    code, out, err = run("remove-orphans", str(planted.root), "--apply", "--json")
    assert code == code_expected and expected in err and path.name in err
    assert json.loads(out)["error"]["exitCode"] == code_expected
    from airflow_lakeformat.core.errors import CorruptMetadataError

    with pytest.raises(CorruptMetadataError, match=path.name):
        remove_orphan_files(table, dry_run=False)  # the table object itself re-loads after listing
    assert files_under(tmp_path) == before


def test_metadata_damaged_after_planning_stops_the_deletes(tmp_path: Path) -> None:
    """The re-check re-loads the table before each batch: garbage published as the next metadata
    version after planning is a typed error before anything is deleted."""
    from airflow_lakeformat.core.errors import CorruptMetadataError

    planted = build_planted(tmp_path)
    plan = plan_orphan_cleanup(planted.table)
    version = int(Path(planted.table.metadata_location).name[1:].split(".")[0])
    (planted.root / "metadata" / f"v{version + 1}.metadata.json").write_text("garbage")
    before = files_under(tmp_path)
    report = tmp_path / "r.jsonl"
    with pytest.raises(CorruptMetadataError):
        execute_orphan_cleanup(planted.table, plan, dry_run=False, report=str(report))
    assert files_under(tmp_path) == before
    assert {json.loads(x)["action"] for x in report.read_text().splitlines()} == {"not-attempted"}


def test_refusals(tmp_path: Path) -> None:
    planted = build_planted(tmp_path)
    # gc.enabled=false refuses, as Java does.
    with planted.table.table.transaction() as tx:
        tx.set_properties({"gc.enabled": "false"})
    with pytest.raises(MaintenanceRefusedError, match=r"gc\.enabled"):
        plan_orphan_cleanup(open_path_table(str(planted.root)))
    with planted.table.table.transaction() as tx:
        tx.set_properties({"gc.enabled": "true", "write.data.path": str(tmp_path)})
    # A data path that contains the table location would list other tables.
    with pytest.raises(MaintenanceRefusedError, match="contains the table location"):
        plan_orphan_cleanup(open_path_table(str(planted.root)))
    with planted.table.table.transaction() as tx:
        tx.remove_properties("write.data.path")
    # A copy of the table: its metadata's location is the original's, whose files it must not judge.
    copy = tmp_path / "copy"
    shutil.copytree(planted.root, copy)
    with pytest.raises(MaintenanceRefusedError, match="copied or re-registered"):
        plan_orphan_cleanup(open_path_table(str(copy)))
    # Read-only (a metadata file): a dry run only.
    read_only = open_path_table(open_path_table(str(planted.root)).metadata_location)
    assert remove_orphan_files(read_only).to_json()["warnings"]
    with pytest.raises(MaintenanceRefusedError, match=r"read-only|metadata file"):
        remove_orphan_files(read_only, dry_run=False)
    assert planted.old_orphans <= files_under(tmp_path)


def test_an_external_data_path_is_listed_too(tmp_path: Path) -> None:
    planted = build_planted(tmp_path)
    external = tmp_path / "external-data"
    with planted.table.table.transaction() as tx:
        tx.set_properties({"write.data.path": str(external)})
    table = open_path_table(str(planted.root))
    from airflow_lakeformat.core.iceberg.write.write import append

    append(table, rows([500], "c", DAY))
    written = files_under(external)
    assert len(written) == 1
    for path in written:
        set_age(Path(path), OLD_DAYS)
    stray = plant(external / "cat=c" / "stray.parquet", OLD_DAYS)
    expected = planted.expected() | {str(stray)}
    document = remove_orphan_files(table, dry_run=False).to_json()
    assert orphan_paths(document) == expected
    assert document["locations"] == [str(planted.root), str(external)]
    assert files_under(external) == written


def test_cli_json_report_and_sample(tmp_path: Path) -> None:
    planted = build_planted(tmp_path)
    report = tmp_path / "audit.jsonl"
    code, out, err = run(
        "remove-orphans",
        str(planted.root),
        "--dry-run",
        "--json",
        "--max-listed",
        "2",
        "--report",
        str(report),
    )
    assert code == 0, err
    document = json.loads(out)
    assert document["orphans"] == len(planted.old_orphans) and len(document["orphanPaths"]) == 2
    assert document["orphanPathsTruncated"] is True and document["report"] == str(report)
    assert {json.loads(x)["path"] for x in report.read_text().splitlines()} == planted.old_orphans
    assert planted.old_orphans <= files_under(tmp_path)

    code, text, err = run("remove-orphans", str(planted.root), "--older-than", "2 d", "--apply")
    assert code == 0 and "orphaned" in text and "files deleted" in text
    assert files_under(tmp_path) & planted.old_orphans == set()

    code, _, err = run("remove-orphans", str(planted.root), "--equal-scheme", "nonsense")
    assert code == 2 and "FROM=TO" in err  # a usage mistake


def test_paimon_refuses_iceberg_only_flags(sample_tables: Path) -> None:
    code, _, err = run("remove-orphans", str(sample_tables / "append_tbl"), "--equal-scheme", "s3a=s3")
    assert code == 2 and "--equal-scheme" in err and "only for Iceberg" in err
