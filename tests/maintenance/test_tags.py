"""Paimon tags: the tag file Java writes, create/delete/list/expire, period names, auto-tag retention, dry runs,
protection by expiry and orphan cleanup, pypaimon reading our tags, and the CLI."""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from airflow_lakeformat import cli
from airflow_lakeformat.core.errors import (
    SnapshotNotFoundError,
    TagAlreadyExistsError,
    TagNotFoundError,
    UsageError,
)
from airflow_lakeformat.core.maintenance.tag_periods import PeriodHandler, oldest_auto_tags
from airflow_lakeformat.core.maintenance.tag_results import TagInfo
from airflow_lakeformat.core.paimon.live_files import live_entries
from airflow_lakeformat.core.paimon.maintenance.expiry import expire_snapshots
from airflow_lakeformat.core.paimon.maintenance.orphans import plan_orphan_cleanup
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.table import Table
from airflow_lakeformat.core.paimon.tags.tag_files import local_datetime_from_json, local_datetime_to_json
from airflow_lakeformat.core.tables import PaimonTable, open_table
from tests.support.maintenance import OLD, build_history, referenced_files, tree
from tests.support.tables import TableBuilder


def _table(root: Path, snapshots: int = 3, **options: str) -> PaimonTable:
    builder = TableBuilder(root, [("v", "BIGINT")], options=dict(options))
    start = int(time.time() * 1000) - 10_000
    for i in range(snapshots):
        builder.commit([builder.entry()], time_millis=start + i)
    table = open_table(str(root))
    assert isinstance(table, PaimonTable)
    return table


def _tag_json(root: Path, name: str) -> dict[str, object]:
    document: dict[str, object] = json.loads((root / "tag" / f"tag-{name}").read_text())
    return document


# -- the tag file ----------------------------------------------------------------------------------------


def test_a_tag_is_the_snapshot_json_plus_java_s_retention_fields(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = _table(root)
    table.maintenance.create_tag("kept", 2, "1 d")
    table.maintenance.create_tag("plain", 2)
    snapshot = json.loads((root / "snapshot" / "snapshot-2").read_text())
    kept, plain = _tag_json(root, "kept"), _tag_json(root, "plain")
    assert plain == snapshot  # no retention: Java writes the snapshot JSON alone (readers <= 0.7)
    assert {k: v for k, v in kept.items() if not k.startswith("tag")} == snapshot
    assert kept["tagTimeRetained"] == 86400.0
    created = kept["tagCreateTime"]
    assert isinstance(created, list) and 5 <= len(created) <= 7
    assert abs(local_datetime_from_json(created) - datetime.now()) < timedelta(minutes=1)
    # Jackson's LocalDateTime array: trailing zero second and nanos are omitted
    assert local_datetime_to_json(datetime(2024, 1, 2, 3, 4)) == [2024, 1, 2, 3, 4]
    assert local_datetime_to_json(datetime(2024, 1, 2, 3, 4, 0, 5)) == [2024, 1, 2, 3, 4, 0, 5000]
    listed = {t.name: t for t in table.maintenance.list_tags().tags}
    assert listed["kept"].time_retained_ms == 86_400_000 and listed["plain"].create_time_ms is None
    created_ms = listed["kept"].create_time_ms
    assert created_ms is not None and listed["kept"].expires_at_ms == created_ms + 86_400_000
    assert table.native.snapshot_manager.tag("kept").id == 2  # our reader reads it as a snapshot


def test_create_refuses_missing_snapshots_and_existing_tags_and_a_dry_run_writes_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "t"
    table = _table(root)
    before = tree(table.native)
    dry = table.maintenance.create_tag("t1", dry_run=True)
    assert tree(table.native) == before and [t.snapshot_id for t in dry.created] == [3]
    with pytest.raises(SnapshotNotFoundError):
        table.maintenance.create_tag("t1", 99)
    table.maintenance.create_tag("t1", 1)
    with pytest.raises(TagAlreadyExistsError):
        table.maintenance.create_tag("t1", 2)
    again = table.maintenance.create_tag("t1", 2, ignore_if_exists=True)
    assert again.created == [] and [t.snapshot_id for t in again.already_existed] == [1]
    assert table.maintenance.create_tag("t1", 2, replace=True).created[0].snapshot_id == 2
    assert table.native.snapshot_manager.tag("t1").id == 2
    for bad in ("", " x", "a/b"):
        with pytest.raises(UsageError):
            table.maintenance.create_tag(bad)


def test_default_time_retained_applies_and_an_expired_snapshot_is_taken_from_its_tag(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = _table(root, **{"tag.default-time-retained": "2 h"})
    table.maintenance.create_tag("first", 1)
    assert _tag_json(root, "first")["tagTimeRetained"] == 7200.0
    (root / "snapshot" / "snapshot-1").unlink()  # as if expired: the tag still holds snapshot 1
    assert table.maintenance.create_tag("copy", 1).created[0].snapshot_id == 1


# -- delete, expire, dry runs ----------------------------------------------------------------------------


def test_delete_removes_only_the_tag_file_and_says_files_are_left_to_orphan_cleanup(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = _table(root)
    table.maintenance.create_tag("old", 1)
    (root / "snapshot" / "snapshot-1").unlink()
    before = tree(table.native)
    dry = table.maintenance.delete_tag("old", dry_run=True)
    assert tree(table.native) == before and [d.tag.name for d in dry.deleted] == ["old"]
    result = table.maintenance.delete_tag("old")
    assert set(before) - set(tree(table.native)) == {"tag/tag-old"}
    assert any("orphan cleanup" in line and "expired" in line for line in result.decisions)
    with pytest.raises(TagNotFoundError):
        table.maintenance.delete_tag("old")


def test_delete_notes_a_branch_made_from_the_tag(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = _table(root)
    table.maintenance.create_tag("base", 2)
    branch = root / "branch" / "branch-dev"
    (branch / "tag").mkdir(parents=True)
    shutil.copy(root / "tag" / "tag-base", branch / "tag" / "tag-base")
    result = table.maintenance.delete_tag("base")
    assert any("branch(es) dev" in line for line in result.decisions)
    assert (branch / "tag" / "tag-base").exists()


def test_expire_tags_by_retention_and_by_older_than_with_the_mtime_fallback(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = _table(root)
    m = table.maintenance
    m.create_tag("short", 1, "1 h")
    m.create_tag("long", 2, "30 d")
    m.create_tag("manual", 3)  # no create time: judged by its file's modification time
    old = time.time() - 3 * 86400
    os.utime(root / "tag" / "tag-manual", (old, old))
    later = datetime.now() + timedelta(hours=2)

    before = tree(table.native)
    dry = m.expire_tags(dry_run=True, now=later)
    assert [d.tag.name for d in dry.deleted] == ["short"] and tree(table.native) == before
    assert [t.name for t in dry.tags] == ["long", "manual"]
    by_age = m.expire_tags(older_than="1 d", dry_run=True, now=later)
    assert sorted(d.tag.name for d in by_age.deleted) == ["manual", "short"]
    assert "file modified" in next(d.reason for d in by_age.deleted if d.tag.name == "manual")
    stamp = (datetime.now() - timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")
    assert sorted(d.tag.name for d in m.expire_tags(older_than=stamp, dry_run=True).deleted) == ["manual"]
    real = m.expire_tags(older_than=timedelta(days=1), now=later, dry_run=False)
    assert sorted(d.tag.name for d in real.deleted) == ["manual", "short"]
    assert sorted(table.native.snapshot_manager.tag_names()) == ["long"]
    with pytest.raises(UsageError):
        m.expire_tags(older_than="soon")


# -- automatic names and their retention ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("period", "formatter", "at", "name"),
    [
        ("daily", "with_dashes", datetime(2023, 7, 18, 0, 0), "2023-07-17"),
        ("daily", "with_dashes", datetime(2023, 7, 17, 23, 59, 59), "2023-07-16"),
        ("daily", "without_dashes", datetime(2024, 1, 1, 0, 0), "20231231"),
        ("daily", "without_dashes_and_spaces", datetime(2024, 3, 1, 0, 30), "20240229"),
        ("hourly", "with_dashes", datetime(2024, 1, 1, 0, 0), "2023-12-31 23"),
        ("hourly", "without_dashes", datetime(2024, 1, 1, 0, 59), "20231231 23"),
        ("hourly", "without_dashes_and_spaces", datetime(2024, 1, 1, 1, 0), "2024010100"),
        ("two-hours", "with_dashes", datetime(2024, 1, 1, 1, 59), "2023-12-31 22"),
        ("two-hours", "without_dashes", datetime(2024, 1, 1, 2, 0), "20240101 00"),
        ("two-hours", "without_dashes_and_spaces", datetime(2024, 1, 1, 0, 0), "2023123122"),
    ],
)
def test_period_names_across_midnight_and_hour_boundaries(
    period: str, formatter: str, at: datetime, name: str
) -> None:
    handler = PeriodHandler.of(period, formatter)
    assert handler.tag_name_at(at) == name
    assert handler.is_auto_tag(name)
    assert handler.tag_name_at(handler.floor(at) + handler.period) == handler.format(handler.floor(at))


def test_custom_period_duration_and_auto_tag_recognition() -> None:
    handler = PeriodHandler.from_options({"tag.creation-period-duration": "30 min"})
    assert handler.tag_name_at(datetime(2024, 1, 1, 0, 10)) == "202312312330"
    dashes, plain = PeriodHandler.of("daily", "with_dashes"), PeriodHandler.of("daily", "without_dashes")
    assert dashes.is_auto_tag("2024-01-01") and not dashes.is_auto_tag("20240101")
    assert plain.is_auto_tag("20240101") and not plain.is_auto_tag("2024-01-01")  # #5785/#5786
    assert not dashes.is_auto_tag("2024-1-1") and not dashes.is_auto_tag("nightly")
    with pytest.raises(UsageError):
        PeriodHandler.of("weekly")
    with pytest.raises(UsageError):
        PeriodHandler.of("daily", "slashes")


def test_num_retained_max_deletes_only_auto_tags_oldest_first() -> None:
    handler = PeriodHandler.of("daily", "without_dashes")
    tags = [
        TagInfo("20240103", 7),
        TagInfo("manual", 1),
        TagInfo("20240101", 5),
        TagInfo("2024-01-02", 6),  # another formatter's name: not an auto tag of this one
        TagInfo("20240102", 6),
    ]
    assert [t.name for t in oldest_auto_tags(tags, handler, 1)] == ["20240101", "20240102"]
    assert oldest_auto_tags(tags, handler, 3) == []


def test_scheduled_tags_are_idempotent_and_keep_num_retained_max_auto_tags(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = _table(
        root,
        **{
            "tag.period-formatter": "without_dashes",
            "tag.num-retained-max": "2",
            "tag.default-time-retained": "3 d",
        },
    )
    m = table.maintenance
    m.create_tag("release", 1)
    for day in (2, 3, 4):
        m.create_scheduled_tag(datetime(2024, 1, day, 0, 5))
    assert sorted(table.native.snapshot_manager.tag_names()) == ["20240102", "20240103", "release"]
    assert _tag_json(root, "20240103")["tagTimeRetained"] == 259200.0
    before = tree(table.native)
    rerun = m.create_scheduled_tag(datetime(2024, 1, 4, 0, 5))
    assert rerun.created == [] and [t.name for t in rerun.already_existed] == ["20240103"]
    assert rerun.deleted == [] and tree(table.native) == before
    dry = m.create_scheduled_tag(datetime(2024, 1, 5, 0, 5), dry_run=True)
    assert [t.name for t in dry.created] == ["20240104"] and [d.tag.name for d in dry.deleted] == ["20240102"]
    assert tree(table.native) == before
    hourly = m.create_scheduled_tag(datetime(2024, 1, 5, 0, 5), period="hourly", num_retained_max=5)
    assert [t.name for t in hourly.created] == ["20240104 23"]


# -- protection by expiry and orphan cleanup, and pypaimon ------------------------------------------------


def test_expiry_and_orphan_cleanup_keep_the_files_of_a_tag_we_made(tmp_path: Path) -> None:
    root = tmp_path / "t"
    build_history(root, snapshots=8)
    table = open_table(str(root))
    table.maintenance.create_tag("audit", 2)
    os.utime(root / "tag" / "tag-audit", (OLD, OLD))
    native = Table.open(str(root))
    tagged = native.snapshot_manager.tag("audit")
    needed = referenced_files(native, tagged)
    result = expire_snapshots(native, retain_min=1, older_than=timedelta(0), dry_run=False)
    assert result.plan.expired_ids and 2 in result.plan.expired_ids
    assert needed <= set(tree(native))
    orphans = plan_orphan_cleanup(native, older_than=timedelta(hours=1))
    assert not {p.rsplit("/", 1)[-1] for p in needed} & {o.path.rsplit("/", 1)[-1] for o in orphans.orphans}


@pytest.mark.interop
def test_pypaimon_reads_our_tag_as_the_snapshot_it_tags(sample_tables: Path) -> None:
    from tests.support.pypaimon import run_oracle_batch

    path = sample_tables / "append_tbl"
    table = open_table(str(path))
    table.maintenance.create_tag("ours", 2, "7 d")
    table.maintenance.create_tag("plain", 2)
    by_tag, by_retained, by_snapshot, plan = run_oracle_batch(
        [
            ["read", path, "--tag", "plain"],
            ["read", path, "--tag", "ours"],
            ["read", path, "--snapshot", "2"],
            ["plan", path, "--tag", "ours"],
        ]
    )
    assert by_tag == by_retained == by_snapshot and by_snapshot
    native = Table.open(str(path))
    paths = DataFilePaths(native.schema)
    ours = {
        paths.relative_path(e).rsplit("/", 1)[-1]
        for e in live_entries(native, native.snapshot_manager.tag("ours"))
    }
    assert ours == {f["fileName"] for f in plan["files"]}


# -- the CLI -----------------------------------------------------------------------------------------------


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(list(argv), out=out)
    return code, out.getvalue()


def test_cli_tag_commands_print_one_document_shape(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    _table(Path(root))
    code, text = _run("tag", "create", root, "nightly", "--retain", "7d", "--json")
    created = json.loads(text)
    assert code == 0 and list(created)[:4] == ["operation", "format", "table", "dryRun"]
    assert created["operation"] == "create-tag" and created["created"][0]["timeRetainedMs"] == 604_800_000
    assert _run("tag", "create", root, "nightly")[0] == 2
    code, text = _run("tag", "list", root)
    assert code == 0 and text.splitlines()[0].split() == [
        "name",
        "snapshot",
        "schema",
        "created",
        "retained",
        "expires",
    ]
    assert "7 d" in text
    listed = json.loads(_run("tag", "list", root, "--json")[1])
    assert set(listed) == set(created) and [t["name"] for t in listed["tags"]] == ["nightly"]
    dry = json.loads(_run("expire-tags", root, "--older-than", "0d", "--dry-run", "--json")[1])
    assert dry["dryRun"] and [d["name"] for d in dry["deleted"]] == ["nightly"]
    default = json.loads(_run("expire-tags", root, "--older-than", "0d", "--json")[1])
    assert default["dryRun"] and (Path(root) / "tag" / "tag-nightly").exists()  # deletes by age: a dry run
    with pytest.raises(SystemExit) as both:  # --apply with --dry-run: a usage error, as for expire
        _run("expire-tags", root, "--older-than", "0d", "--apply", "--dry-run")
    assert both.value.code == 2
    assert _run("expire-tags", root, "--older-than", "5")[0] == 2
    assert _run("tag", "delete", root, "nightly", "--dry-run")[0] == 0
    assert (Path(root) / "tag" / "tag-nightly").exists()
    code, text = _run("tag", "delete", root, "nightly", "--json")
    assert code == 0 and json.loads(text)["tags"] == [] and not (Path(root) / "tag" / "tag-nightly").exists()
    assert _run("tag", "delete", root, "nightly")[0] == 6
    assert _run("tag", "create", root, "x", "--snapshot", "99")[0] == 6
