"""Iceberg data compaction in the worker: options, planner, delete index, rewrite, the replace commit, partial
progress, the partition filter and compact-deletes (Java 1.10.2 semantics; Java itself reads the results in
tests/interop/test_iceberg_data_compaction_interop.py).

The numbers are those of Java's ``SizeBasedFileRewritePlanner``/``BinPackRewriteFilePlanner`` (the worked table
in the project's data-compaction reference, observed on the Java oracle): sizing of a group, file and group
selection, the old-spec collision, next-fit packing, ``max-files-to-rewrite`` and the job order.
"""

from __future__ import annotations

import pytest

from airflow_lakeformat.core.errors import UsageError
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_options import CompactionOptions
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_plan import (
    AttachedDelete,
    CompactionCandidate,
    bin_pack,
    expected_output_files,
    input_split_size,
    plan_file_groups,
)

MIB = 1024 * 1024
DEFAULTS = CompactionOptions()


def small(name: str, partition: tuple = ("a",), size: int = 100, spec: int = 0, **kw) -> CompactionCandidate:
    return CompactionCandidate(name, spec, partition, size, kw.pop("records", 10), **kw)


def test_defaults_are_javas() -> None:
    assert DEFAULTS.target_file_size_bytes == 536870912
    assert DEFAULTS.min_file_size_bytes == 402653184
    assert DEFAULTS.max_file_size_bytes == 966367641
    assert DEFAULTS.write_max_file_size == 751619276
    assert DEFAULTS.min_input_files == 5
    assert DEFAULTS.delete_ratio_threshold == 0.3


@pytest.mark.parametrize(
    ("group_mib", "files", "split"),
    [
        (100, 1, 512 * MIB),
        (560, 1, 560 * MIB + 5120),
        (600, 2, 512 * MIB),
        (1100, 2, 550 * MIB + 5120),
        (1300, 3, 512 * MIB),
        (10340, 20, 517 * MIB + 5120),
    ],
)
def test_group_sizing_matches_javas_worked_values(group_mib: int, files: int, split: int) -> None:
    assert expected_output_files(group_mib * MIB, DEFAULTS) == files
    assert input_split_size(group_mib * MIB, DEFAULTS) == split


def test_target_size_comes_from_the_option_then_the_table_property() -> None:
    from_table = CompactionOptions.from_options({}, {"write.target-file-size-bytes": "1000"})
    assert (from_table.target_file_size_bytes, from_table.min_file_size_bytes) == (1000, 750)
    from_option = CompactionOptions.from_options(
        {"target-file-size-bytes": "2000"}, {"write.target-file-size-bytes": "1000"}
    )
    assert (from_option.target_file_size_bytes, from_option.max_file_size_bytes) == (2000, 3600)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"min-input-file": "2"}, "Cannot use options ['min-input-file']"),
        ({"min-input-files": "0"}, "min-input-files must be > 0"),
        ({"min-file-size-bytes": "600", "target-file-size-bytes": "500"}, "must be < target"),
        ({"max-file-size-bytes": "400", "target-file-size-bytes": "500"}, "must be > target"),
        ({"delete-ratio-threshold": "0"}, "delete-ratio-threshold must be in (0, 1]"),
        ({"rewrite-job-order": "random"}, "rewrite-job-order must be one of"),
        ({"rewrite-all": "yes"}, "rewrite-all must be true or false"),
        ({"max-files-to-rewrite": "x"}, "max-files-to-rewrite must be an integer"),
    ],
)
def test_options_java_refuses_are_refused_typed(options: dict, fragment: str) -> None:
    with pytest.raises(UsageError) as caught:
        CompactionOptions.from_options(options)
    assert fragment in str(caught.value)


def test_a_lone_small_file_is_never_rewritten_and_five_are() -> None:
    assert plan_file_groups([small("f0")], current_spec_id=0, options=DEFAULTS) == []
    four = [small(f"f{i}") for i in range(4)]
    assert plan_file_groups(four, current_spec_id=0, options=DEFAULTS) == []
    groups = plan_file_groups([*four, small("f4")], current_spec_id=0, options=DEFAULTS)
    assert [g.to_json()["paths"] for g in groups] == [["f0", "f1", "f2", "f3", "f4"]]
    assert groups[0].reasons == {"too-small": 5}


def test_groups_never_mix_partitions_and_well_sized_files_stay() -> None:
    options = CompactionOptions.from_options({"target-file-size-bytes": "1000", "min-input-files": "2"})
    files = [
        small("a1", ("a",)),
        small("b1", ("b",)),
        small("a2", ("a",)),
        small("a-good", ("a",), size=1000),  # inside [750, 1800]: not a candidate
        small("b2", ("b",)),
    ]
    groups = plan_file_groups(files, current_spec_id=0, options=options)
    assert [(g.partition, [f.path for f in g.files]) for g in groups] == [
        (("a",), ["a1", "a2"]),
        (("b",), ["b1", "b2"]),
    ]


def test_old_spec_files_join_the_all_null_partition_of_the_current_spec() -> None:
    options = CompactionOptions.from_options({"target-file-size-bytes": "1000", "min-input-files": "2"})
    files = [
        small("old1", (), spec=0),
        small("old2", (), spec=0),
        small("null1", (None,), spec=1),
        small("null2", (None,), spec=1),
        small("seven1", (7,), spec=1),
        small("seven2", (7,), spec=1),
    ]
    groups = plan_file_groups(files, current_spec_id=1, options=options)
    assert sorted([f.path for f in g.files] for g in groups) == [
        ["old1", "old2", "null1", "null2"],
        ["seven1", "seven2"],
    ]


def test_next_fit_packing_closes_a_bin_that_the_next_file_overflows() -> None:
    files = [small(n, size=s) for n, s in (("a", 60), ("b", 50), ("c", 40), ("d", 200))]
    assert [[f.path for f in b] for b in bin_pack(files, 100)] == [["a"], ["b", "c"], ["d"]]


def test_a_single_oversized_file_is_split() -> None:
    options = CompactionOptions.from_options({"target-file-size-bytes": "1000"})
    groups = plan_file_groups([small("big", size=5000)], current_spec_id=0, options=options)
    assert len(groups) == 1 and groups[0].reasons == {"too-large": 1}
    assert groups[0].expected_output_files == 5


def test_deletes_select_a_single_file_by_count_or_by_ratio() -> None:
    options = CompactionOptions.from_options({"target-file-size-bytes": "1000", "delete-file-threshold": "2"})
    pos = AttachedDelete("d1", "position", 1, file_scoped=True)
    eq = AttachedDelete("d2", "equality", 50, file_scoped=False)
    good = {"size": 1000, "records": 100}
    one_delete = small("one", deletes=(pos,), **good)
    two_deletes = small("two", deletes=(pos, eq), **good)
    assert plan_file_groups([one_delete], current_spec_id=0, options=options) == []
    groups = plan_file_groups([two_deletes], current_spec_id=0, options=options)
    assert groups[0].reasons == {"too-many-deletes": 1} and groups[0].delete_files == ("d1", "d2")
    heavy = AttachedDelete("d3", "position", 30, file_scoped=True)
    ratio = plan_file_groups([small("r", deletes=(heavy,), **good)], current_spec_id=0, options=DEFAULTS)
    # a lone small file is rewritten only because its deletes are worth purging (the group filter's last rule)
    assert [g.reasons for g in ratio] == [{"too-small": 1}]
    by_ratio = plan_file_groups(
        [small("r", deletes=(heavy,), **good)],
        current_spec_id=0,
        options=CompactionOptions.from_options({"target-file-size-bytes": "1000"}),
    )
    assert [g.reasons for g in by_ratio] == [{"high-delete-ratio": 1}]
    # equality deletes never count towards the ratio (Java counts file-scoped deletes only)
    eq_only = AttachedDelete("d4", "equality", 100, file_scoped=False)
    assert (
        plan_file_groups(
            [small("e", deletes=(eq_only,), **good)],
            current_spec_id=0,
            options=CompactionOptions.from_options({"target-file-size-bytes": "1000"}),
        )
        == []
    )


def test_rewrite_all_takes_every_file_even_a_lone_well_sized_one() -> None:
    options = CompactionOptions.from_options({"target-file-size-bytes": "1000", "rewrite-all": "true"})
    groups = plan_file_groups([small("good", size=1000)], current_spec_id=0, options=options)
    assert [g.reasons for g in groups] == [{"rewrite-all": 1}]


def test_max_files_to_rewrite_cuts_the_last_group_and_sizes_it_from_what_it_keeps() -> None:
    options = CompactionOptions.from_options(
        {"target-file-size-bytes": "1000", "min-input-files": "2", "max-files-to-rewrite": "3"}
    )
    files = [small(f"a{i}", ("a",), size=500) for i in range(2)] + [
        small(f"b{i}", ("b",), size=700) for i in range(3)
    ]
    groups = plan_file_groups(files, current_spec_id=0, options=options)
    assert [[f.path for f in g.files] for g in groups] == [["a0", "a1"], ["b0"]]
    assert groups[1].input_bytes == 700 and groups[1].expected_output_files == 1


def test_job_order_sorts_groups_by_bytes_or_files() -> None:
    base = {"target-file-size-bytes": "1000", "min-input-files": "2"}
    files = [small(f"a{i}", ("a",), size=100) for i in range(3)] + [
        small(f"b{i}", ("b",), size=300) for i in range(2)
    ]
    order = {
        o: [
            g.partition
            for g in plan_file_groups(
                files,
                current_spec_id=0,
                options=CompactionOptions.from_options({**base, "rewrite-job-order": o}),
            )
        ]
        for o in ("none", "bytes-desc", "files-asc")
    }
    assert order == {"none": [("a",), ("b",)], "bytes-desc": [("b",), ("a",)], "files-asc": [("b",), ("a",)]}


# --- which deletes apply to a data file (DeleteFileIndex's sequence-number rules) -----------------------------

from airflow_lakeformat.core.iceberg.maintenance.data_compaction_deletes import (  # noqa: E402
    DeleteEntry,
    DeleteIndex,
    dangling_deletes,
)


def _paths(entries) -> list[str]:
    return [e.path for e in entries]


def test_position_deletes_apply_at_or_above_the_files_sequence_number_equality_strictly_above() -> None:
    index = DeleteIndex(
        [
            DeleteEntry("pos-at-5", "position", 0, ("a",), 5, 1),
            DeleteEntry("eq-at-5", "equality", 0, ("a",), 5, 1, equality_ids=(1,)),
            DeleteEntry("eq-at-6", "equality", 0, ("a",), 6, 1, equality_ids=(1,)),
            DeleteEntry("pos-at-4", "position", 0, ("a",), 4, 1),
        ]
    )
    assert _paths(index.for_data_file("f", 0, ("a",), data_sequence_number=5)) == ["pos-at-5", "eq-at-6"]


def test_deletes_stay_in_their_spec_and_partition_unless_global_equality() -> None:
    index = DeleteIndex(
        [
            DeleteEntry("other-partition", "position", 0, ("b",), 9, 1),
            DeleteEntry("other-spec", "position", 1, ("a",), 9, 1),
            DeleteEntry("global-eq", "equality", 2, (), 9, 1, spec_unpartitioned=True),
            DeleteEntry("unpartitioned-pos", "position", 2, (), 9, 1, spec_unpartitioned=True),
        ]
    )
    assert _paths(index.for_data_file("f", 0, ("a",), data_sequence_number=1)) == ["global-eq"]


def test_a_file_scoped_position_delete_applies_only_to_the_file_it_names() -> None:
    index = DeleteIndex([DeleteEntry("dv-like", "position", 0, ("a",), 3, 2, referenced_path="f1")])
    assert _paths(index.for_data_file("f1", 0, ("a",), data_sequence_number=3)) == ["dv-like"]
    assert index.for_data_file("f2", 0, ("a",), data_sequence_number=1) == ()
    assert index.for_data_file("f1", 0, ("a",), data_sequence_number=4) == ()  # written after the delete
    attached = index.for_data_file("f1", 0, ("a",), data_sequence_number=3)[0].attached()
    assert attached.file_scoped and attached.record_count == 2


def test_dangling_deletes_are_those_no_live_data_file_takes() -> None:
    index = DeleteIndex(
        [
            DeleteEntry("still-used", "position", 0, ("a",), 5, 1, referenced_path="kept"),
            DeleteEntry("named-a-rewritten-file", "position", 0, ("a",), 5, 1, referenced_path="gone"),
            DeleteEntry("older-than-the-new-files", "equality", 0, ("a",), 4, 1),
        ]
    )
    # after a rewrite the new file carries the starting sequence number 4: the equality delete at 4 no
    # longer applies to anything, nor does the position delete that named a replaced file
    live = [("kept", 0, ("a",), 4), ("new", 0, ("a",), 4)]
    assert dangling_deletes(index, live) == ["named-a-rewritten-file", "older-than-the-new-files"]


# --- the plan of a real table (pyiceberg-built, with position and equality deletes) --------------------------

from airflow_lakeformat.core.iceberg.maintenance.data_compaction import plan_data_compaction  # noqa: E402
from tests.iceberg.scenarios import build, create_table  # noqa: E402


def test_plan_of_a_v2_table_groups_every_live_file_with_its_deletes(tmp_path) -> None:
    sc = build("hadoop", 2, tmp_path)
    plan = plan_data_compaction(sc.table, {"rewrite-all": "true"})
    head = sc.table.snapshot(ref="main")
    assert plan.snapshot_id == head.snapshot_id and plan.sequence_number == head.sequence_number
    files = sc.table.table.inspect.files().to_pylist()  # pyiceberg's own reading of the current snapshot
    live = sum(1 for f in files if f["content"] == 0)
    assert live >= 5
    assert plan.live_data_files == live and plan.files_to_rewrite == live
    # two delete files are live, but the equality delete was written for partition (a, day, bucket) of the
    # newest spec, where no data file lives: it applies to nothing (a dangling delete), so one is applied
    assert plan.live_delete_files == 2 and plan.delete_files_applied == 1
    by_path = {c.path: c for g in plan.groups for c in g.files}
    bucket_file = next(p for p in by_path if p.endswith("bucket.parquet"))
    assert [d.content for d in by_path[bucket_file].deletes] == ["position"]
    assert not [p for p, c in by_path.items() if any(d.content == "equality" for d in c.deletes)]
    document = plan.to_json()
    assert document["dryRun"] is True and document["format"] == "iceberg"
    assert document["options"]["rewrite-all"] is True
    assert "would rewrite" in plan.summary() and len(repr(plan)) < 300


def test_plan_with_defaults_rewrites_nothing_on_a_table_of_few_small_files(tmp_path) -> None:
    sc = build("hadoop", 1, tmp_path)
    plan = plan_data_compaction(sc.table)
    # min-input-files 5 per partition: no partition of this table has five candidates
    assert plan.groups == () and "nothing to rewrite" in plan.summary()


def test_an_empty_table_plans_nothing(tmp_path) -> None:
    empty = create_table("hadoop", 2, tmp_path, name="empty")
    plan = plan_data_compaction(empty)
    assert plan.snapshot_id is None and plan.groups == ()


def test_unknown_options_are_refused_before_the_table_is_read(tmp_path) -> None:
    empty = create_table("hadoop", 2, tmp_path, name="empty")
    with pytest.raises(UsageError, match="Cannot use options"):
        plan_data_compaction(empty, {"target-file-size": "1"})


# --- rewriting a group: the live rows, deletes applied, in new files of the group's partition ----------------

import datetime  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from pyiceberg.manifest import DataFileContent  # noqa: E402

from airflow_lakeformat.core.iceberg.maintenance.data_compaction_rewrite import rewrite_group  # noqa: E402
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_scan import data_files_by_path  # noqa: E402
from airflow_lakeformat.core.iceberg.write import write  # noqa: E402
from tests.iceberg.helpers import commit_delete_files, data_file, local_path, write_parquet  # noqa: E402
from tests.iceberg.scenarios import rows  # noqa: E402


def _small_files_with_deletes(tmp_path):
    """Five one-commit files in partition a (ids 0..9), then a position delete of the first file's row 0 and
    an equality delete of id 7; one file in partition b."""
    table = create_table("hadoop", 2, tmp_path)
    day = datetime.date(2024, 1, 1)
    for first in range(0, 10, 2):
        write.append(table, rows([first, first + 1], "a", day))
    write.append(table, rows([100], "b", day))
    groups = plan_data_compaction(table, {"rewrite-all": "true"}).groups
    first_file = min((c for g in groups if g.partition == ("a",) for c in g.files), key=lambda c: c.path)
    head_row = pq.read_table(local_path(first_file.path)).column("id")[0].as_py()
    pos = write_parquet(
        tmp_path / "landing" / "pos.parquet",
        pa.table({"file_path": [first_file.path], "pos": pa.array([0], pa.int64())}),
    )
    eq = write_parquet(tmp_path / "landing" / "eq.parquet", pa.table({"id": pa.array([7], pa.int64())}))
    pyt = table.table
    commit_delete_files(table, [data_file(pyt, pos, ("a",), content=DataFileContent.POSITION_DELETES)])
    commit_delete_files(
        table, [data_file(pyt, eq, ("a",), content=DataFileContent.EQUALITY_DELETES, equality_ids=[1])]
    )
    return table, head_row


def test_rewriting_a_group_keeps_exactly_the_live_rows_in_the_groups_partition(tmp_path) -> None:
    table, deleted_by_position = _small_files_with_deletes(tmp_path)
    plan = plan_data_compaction(table, {"min-input-files": "2"})
    assert [g.partition for g in plan.groups] == [("a",)]  # b's lone file is not worth a rewrite
    group = plan.groups[0]
    assert len(group.files) == 5 and set(group.delete_files) and plan.delete_files_applied == 2
    head = table.snapshot(ref="main")
    needed = [c.path for c in group.files] + list(group.delete_files)
    result = rewrite_group(table, group, data_files_by_path(table, head, needed))
    assert len(result.outputs) == 1 == group.expected_output_files
    out = result.outputs[0]
    written = pq.read_table(local_path(out.file_path))
    assert sorted(written.column("id").to_pylist()) == sorted(set(range(10)) - {deleted_by_position, 7})
    assert set(written.column("cat").to_pylist()) == {"a"}
    assert (result.rows_read, result.rows_written) == (10, 8) and out.record_count == 8
    assert out.partition[0] == "a" and out.spec_id == table.metadata.default_spec_id
    assert "/cat=a/" in out.file_path  # laid out under its partition, as Java's writers do
    # the footer carries Iceberg field ids, so Java and pyiceberg read the columns by id
    field_ids = [f.metadata[b"PARQUET:field_id"] for f in pq.read_schema(local_path(out.file_path))]
    assert field_ids == [b"1", b"2", b"3", b"4"]
    assert out.lower_bounds and out.value_counts  # statistics from the footer


def test_a_group_over_the_split_size_rolls_into_several_files_every_row_in_exactly_one(tmp_path) -> None:
    table, deleted_by_position = _small_files_with_deletes(tmp_path)
    everything = plan_data_compaction(table, {"rewrite-all": "true"}).groups
    size = sum(c.file_size for g in everything if g.partition == ("a",) for c in g.files)
    options = {"min-input-files": "2", "target-file-size-bytes": str(size // 3)}
    group = next(g for g in plan_data_compaction(table, options).groups if g.partition == ("a",))
    assert group.split_size < group.input_bytes  # the read is split: more than one output file
    head = table.snapshot(ref="main")
    needed = [c.path for c in group.files] + list(group.delete_files)
    result = rewrite_group(table, group, data_files_by_path(table, head, needed))
    assert len(result.outputs) >= 2 and len(set(result.locations)) == len(result.outputs)
    ids = [
        i for out in result.outputs for i in pq.read_table(local_path(out.file_path)).column("id").to_pylist()
    ]
    assert sorted(ids) == sorted(set(range(10)) - {deleted_by_position, 7})
    assert sum(out.record_count for out in result.outputs) == len(ids)


# --- the replace commit ------------------------------------------------------------------------------------

from airflow_lakeformat.core.errors import CommitConflictError  # noqa: E402
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_commit import (  # noqa: E402
    RewriteCommit,
    StagedRewrite,
    stage_rewrite,
)
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import compact_data  # noqa: E402
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files  # noqa: E402
from airflow_lakeformat.core.iceberg.write.commit import commit_with_retry  # noqa: E402


def _data_files_on_disk(table) -> set[str]:
    root = local_path(table.metadata.location)
    return {str(p) for p in __import__("pathlib").Path(root, "data").rglob("*.parquet")}


def test_compact_data_commits_a_replace_snapshot_with_the_starting_sequence_number(tmp_path) -> None:
    table, deleted_by_position = _small_files_with_deletes(tmp_path)
    start = table.snapshot(ref="main")
    result = compact_data(table, {"min-input-files": "2"})
    assert result.snapshot_id is not None and result.groups_committed == 1 and not result.conflicts
    table.refresh()
    head = table.snapshot(ref="main")
    assert head.snapshot_id == result.snapshot_id and head.parent_snapshot_id == start.snapshot_id
    assert head.summary.operation.value == "replace"
    assert head.summary["deleted-data-files"] == "5" and head.summary["added-data-files"] == "1"
    assert (head.summary["deleted-records"], head.summary["added-records"]) == ("10", "8")
    # the parent (a hand-made delete commit) carries no totals, so neither does the replace (as in Java)
    assert "total-data-files" not in head.summary.additional_properties
    live = [f for f in live_files(table, head) if f.content == 0]
    new = [f for f in live if f.snapshot_id == head.snapshot_id]
    assert len(new) == 1
    # Java's use-starting-sequence-number: data sequence number of the start, file sequence number of the commit
    assert new[0].data_sequence_number == start.sequence_number
    assert new[0].file_sequence_number == head.sequence_number
    ids = pq.read_table(local_path(new[0].path)).column("id").to_pylist()
    assert sorted(ids) == sorted(set(range(10)) - {deleted_by_position, 7})
    assert result.rows_purged == 2 and result.files_added == 1
    # both delete files stay live: dropping them is the job of dangling-delete removal, not of this commit
    assert sum(1 for f in live_files(table, head) if f.content != 0) == 2


def test_a_position_delete_committed_during_the_rewrite_skips_the_group_and_leaves_no_file(tmp_path) -> None:
    table, _ = _small_files_with_deletes(tmp_path)
    plan = plan_data_compaction(table, {"min-input-files": "2"})
    group = plan.groups[0]
    start = table.snapshot(ref="main")
    files = data_files_by_path(table, start, [c.path for c in group.files] + list(group.delete_files))
    rewritten = rewrite_group(table, group, files)
    before_commit = _data_files_on_disk(table)
    # a concurrent merge-on-read DELETE of a row of one of the files being rewritten
    target = group.files[-1].path
    late = write_parquet(
        tmp_path / "landing" / "late.parquet",
        pa.table({"file_path": [target], "pos": pa.array([1], pa.int64())}),
    )
    commit_delete_files(
        table, [data_file(table.table, late, ("a",), content=DataFileContent.POSITION_DELETES)]
    )
    concurrent = table.snapshot(ref="main").snapshot_id
    commit = RewriteCommit(
        start.snapshot_id,
        start.sequence_number,
        [([files[c.path] for c in group.files], rewritten.outputs)],
    )
    staged = StagedRewrite()
    with pytest.raises(CommitConflictError, match="position delete committed since the start"):
        commit_with_retry(table, lambda tx: stage_rewrite(tx, table, commit, staged))
    table.refresh()
    assert table.snapshot(ref="main").snapshot_id == concurrent  # nothing committed on top
    assert staged.conflicts and staged.snapshot_id is None
    assert set(rewritten.locations) <= before_commit  # (the caller, compact_data, discards these)


def test_compact_data_removes_everything_it_wrote_when_no_group_can_commit(tmp_path, monkeypatch) -> None:
    table, _ = _small_files_with_deletes(tmp_path)
    before = _data_files_on_disk(table)
    from airflow_lakeformat.core.iceberg.maintenance import data_compaction_commit

    def every_group_conflicts(table, metadata, head, commit):
        return {n: "simulated concurrent rewrite" for n in range(len(commit.groups))}

    monkeypatch.setattr(data_compaction_commit, "find_conflicts", every_group_conflicts)
    with pytest.raises(CommitConflictError, match="every group conflicts"):
        compact_data(table, {"min-input-files": "2"})
    assert _data_files_on_disk(table) == before


def test_remove_dangling_deletes_drops_the_deletes_the_rewrite_applied_in_the_same_commit(tmp_path) -> None:
    table, _ = _small_files_with_deletes(tmp_path)
    result = compact_data(table, {"min-input-files": "2", "remove-dangling-deletes": "true"})
    assert result.delete_files_removed == 2 and result.to_json()["deleteFilesRemoved"] == 2
    table.refresh()
    head = table.snapshot(ref="main")
    assert [f for f in live_files(table, head) if f.content != 0] == []
    assert head.summary["removed-delete-files"] == "2"
    assert head.summary["removed-position-deletes"] == "1" and head.summary["removed-equality-deletes"] == "1"
    # the rows: the new file and b's file, nothing deleted twice or brought back
    rows = sorted(
        i
        for f in live_files(table, head)
        if f.content == 0
        for i in pq.read_table(local_path(f.path)).column("id").to_pylist()
    )
    assert len(rows) == 9 and 7 not in rows and 100 in rows


def test_a_delete_still_needed_by_an_untouched_file_is_not_dangling(tmp_path) -> None:
    table, _ = _small_files_with_deletes(tmp_path)
    # rewrite only four of the five files of partition a: the fifth still needs both deletes
    result = compact_data(
        table, {"min-input-files": "2", "max-files-to-rewrite": "4", "remove-dangling-deletes": "true"}
    )
    assert result.groups_committed == 1 and result.files_rewritten == 4
    assert result.delete_files_removed == 0


def _two_partitions(tmp_path):
    table = create_table("hadoop", 2, tmp_path)
    day = datetime.date(2024, 1, 1)
    for n in range(3):
        write.append(table, rows([n], "a", day))
        write.append(table, rows([10 + n], "b", day))
    return table


def test_partial_progress_commits_batches_at_the_same_starting_sequence_number(tmp_path) -> None:
    table = _two_partitions(tmp_path)
    start = table.snapshot(ref="main")
    options = {
        "min-input-files": "2",
        "partial-progress.enabled": "true",
        "partial-progress.max-commits": "5",
    }
    result = compact_data(table, options)
    assert len(result.snapshot_ids) == 2 and result.groups_committed == 2 and result.files_rewritten == 6
    table.refresh()
    first, second = (table.snapshot(s) for s in result.snapshot_ids)
    assert first.parent_snapshot_id == start.snapshot_id and second.parent_snapshot_id == first.snapshot_id
    new = [f for f in live_files(table, second) if f.snapshot_id in result.snapshot_ids]
    assert len(new) == 2 and {f.data_sequence_number for f in new} == {start.sequence_number}


def test_with_partial_progress_a_failed_batch_is_reported_and_the_next_one_commits(
    tmp_path, monkeypatch
) -> None:
    table = _two_partitions(tmp_path)
    before = _data_files_on_disk(table)
    from airflow_lakeformat.core.iceberg.maintenance import data_compaction_commit

    real = data_compaction_commit.find_conflicts
    calls = []

    def first_batch_conflicts(table, metadata, head, commit):
        calls.append(1)
        if len(calls) == 1:
            return {0: "simulated concurrent rewrite"}
        return real(table, metadata, head, commit)

    monkeypatch.setattr(data_compaction_commit, "find_conflicts", first_batch_conflicts)
    options = {"min-input-files": "2", "partial-progress.enabled": "true"}
    result = compact_data(table, options)
    assert len(result.failed_commits) == 1 and "every group conflicts" in result.failed_commits[0]
    assert len(result.snapshot_ids) == 1 and result.groups_committed == 1
    # the failed batch's new file is gone; the committed one replaced three files
    after = _data_files_on_disk(table)
    assert len(after - before) == 1 and before - after == set()
    # without partial progress both groups share one commit: the conflicting one is skipped, the other lands
    calls.clear()
    single = compact_data(_two_partitions(tmp_path / "again"), {"min-input-files": "2"})
    assert len(single.snapshot_ids) == 1 and single.groups_committed == 1
    assert single.conflicts == ("simulated concurrent rewrite",) and not single.failed_commits


def test_where_selects_files_by_partition_and_refuses_what_does_not_parse(tmp_path) -> None:
    table = _two_partitions(tmp_path)
    only_a = plan_data_compaction(table, {"min-input-files": "2"}, where="cat = 'a'")
    assert [g.partition for g in only_a.groups] == [("a",)]
    upper = plan_data_compaction(
        table, {"min-input-files": "2"}, where="CAT = 'b'"
    )  # Spark: case-insensitive
    assert [g.partition for g in upper.groups] == [("b",)]
    # a predicate on a non-partition column projects to "always true": every partition is a candidate
    by_id = plan_data_compaction(table, {"min-input-files": "2"}, where="id > 100")
    assert sorted(g.partition for g in by_id.groups) == [("a",), ("b",)]
    for bad in ("cat = ", "nosuch = 1"):
        with pytest.raises(UsageError, match="where"):
            plan_data_compaction(table, where=bad)


# --- compact-deletes (rewrite_position_delete_files) --------------------------------------------------------

from airflow_lakeformat.core.iceberg.maintenance.delete_compaction import (  # noqa: E402
    compact_deletes,
    plan_delete_compaction,
)


def test_compact_deletes_takes_only_javas_options_and_its_dry_run_changes_nothing(tmp_path) -> None:
    table, _ = _small_files_with_deletes(tmp_path)
    with pytest.raises(UsageError, match="delete-file-threshold"):
        plan_delete_compaction(table, {"delete-file-threshold": "1"})
    plan = plan_delete_compaction(table)
    assert plan.groups == () and plan.live_delete_files == 1  # one position file; the other is equality
    assert plan.options.target_file_size_bytes == 64 * 1024 * 1024  # write.delete.target-file-size-bytes
    head = table.snapshot(ref="main").snapshot_id
    result = compact_deletes(table, {"rewrite-all": "true"}, dry_run=True)
    assert result.dry_run and result.plan.files_to_rewrite == 1 and result.snapshot_id is None
    table.refresh()
    assert table.snapshot(ref="main").snapshot_id == head


def test_compact_deletes_rewrites_a_delete_file_at_its_inputs_largest_sequence_number(tmp_path) -> None:
    table, _ = _small_files_with_deletes(tmp_path)
    before = {f.path: f for f in live_files(table, table.snapshot(ref="main")) if f.content == 1}
    result = compact_deletes(table, {"rewrite-all": "true"})
    assert result.snapshot_id is not None and result.files_added == 1 and result.dangling_records == 0
    table.refresh()
    after = [f for f in live_files(table, table.snapshot(ref="main")) if f.content == 1]
    assert len(after) == 1 and after[0].path not in before
    assert after[0].data_sequence_number == max(f.data_sequence_number for f in before.values())
    assert after[0].record_count == sum(f.record_count for f in before.values())
