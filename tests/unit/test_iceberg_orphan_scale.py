"""The fast paths of Iceberg orphan cleanup at scale give exactly what the plain paths give.

``bench/bench_iceberg_orphans_scale.py`` measures them; these tests hold them to the reference:

* manifests framed at their sync markers and scanned as one run of records (pyiceberg writes one block per
  entry), and only the live paths taken: the same as fastavro's decode, on every codec, with records the
  pattern does not express, and with sync-marker bytes inside a block;
* manifest lists of fast appends decoded only as far as they are new: the same rows as a full decode, and
  a full decode whenever the parent's bytes do not close the list;
* the valid set built in bulk (``ValidLocations.add_all``) is the one built location by location;
* the local name listing reads ages only of the files the valid set lacks, keeps the hidden-file filter,
  and keeps a file valid under another scheme a candidate (so the prefix mismatch is still reported);
* reachability over a real pyiceberg table with shared list decoding equals reading each snapshot alone.
"""

from __future__ import annotations

import io
import os
import random
import time
from pathlib import Path
from typing import Any

import fastavro
import pytest

from airflow_lakeformat.core import avro_blocks, forked
from airflow_lakeformat.core.errors import CorruptMetadataError
from airflow_lakeformat.core.iceberg.maintenance import orphan_local
from airflow_lakeformat.core.iceberg.maintenance.orphan_listing import HiddenFilter
from airflow_lakeformat.core.iceberg.maintenance.orphan_local import list_local_names, resolve_local_names
from airflow_lakeformat.core.iceberg.metadata.location import FileURI, LocationNormaliser, ValidLocations
from airflow_lakeformat.core.iceberg.reach import reach_decode, reach_frames
from airflow_lakeformat.core.iceberg.reach.reach_decode import (
    decode_manifest_list,
    decode_manifest_live_paths,
    reference_decode_manifest_list,
    reference_decode_manifest_paths,
)
from airflow_lakeformat.core.iceberg.reach.reach_lists import decode_manifest_list_shared
from tests.unit.test_iceberg_reach_decode import (
    CODECS,
    MANIFEST_SCHEMA,
    _avro,
    _entry,
    _list_schema,
    _manifest_row,
)


@pytest.fixture(autouse=True)
def scan_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scan from the first record, with fresh plans (as ``test_iceberg_reach_decode`` does)."""
    monkeypatch.setattr(reach_decode, "SCAN_AFTER_RECORDS", 0)
    for plans in (reach_decode.LIST_PLANS, reach_decode.MANIFEST_PLANS):
        monkeypatch.setattr(plans, "_cache", {})


# -- manifests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("block_records", [1, 100], ids=["block-per-entry", "big-blocks"])
@pytest.mark.parametrize("codec", CODECS)
def test_live_paths_are_the_live_paths_fastavro_decodes(codec: str, block_records: int) -> None:
    rng = random.Random(f"paths-{codec}-{block_records}")
    records = [_entry(rng, columns=40, longest=1500, odd=0.01) for _ in range(600)]
    data = _avro(MANIFEST_SCHEMA, records, codec, block_records=block_records)
    want = [r["data_file"]["file_path"] for r in records if r["status"] != 2]
    assert [ref.path for ref in reference_decode_manifest_paths(data, "m.avro")] == want
    assert decode_manifest_live_paths(data, "m.avro") == want
    narrow = [_entry(rng, columns=6, longest=300) for _ in range(600)]  # all expressed: one joined scan
    data = _avro(MANIFEST_SCHEMA, narrow, codec, block_records=block_records)
    assert decode_manifest_live_paths(data, "m.avro") == [
        r["data_file"]["file_path"] for r in narrow if r["status"] != 2
    ]


def test_many_small_blocks_are_framed_as_split_container_frames_them() -> None:
    rng = random.Random("framing")
    data = _avro(MANIFEST_SCHEMA, [_entry(rng, 6, 300) for _ in range(300)], "deflate", block_records=1)
    split = reach_frames.split(data)
    reference = avro_blocks.split_container(data)
    assert len(split.blocks) > 200
    assert (split.schema_json, split.codec, split.blocks) == (
        reference.schema_json,
        reference.codec,
        reference.blocks,
    )


def test_sync_marker_bytes_inside_a_block_fall_back_to_the_plain_framing() -> None:
    marker = bytes(range(16))
    schema = {"type": "record", "name": "r", "fields": [{"name": "b", "type": "bytes"}]}
    out = io.BytesIO()
    records = [{"b": b"x" * i + marker} for i in range(40)]
    fastavro.writer(out, fastavro.parse_schema(schema), records, sync_interval=1, sync_marker=marker)
    data = out.getvalue()
    reference = avro_blocks.split_container(data)
    assert len(reference.blocks) == 40 and all(marker in block for _, block in reference.blocks)
    assert reach_frames.cut(data, data.index(marker) + 16, marker) is None  # the cut is refused ...
    assert reach_frames.split(data).blocks == reference.blocks  # ... and the plain framing used


def test_wide_tables_escalate_to_the_full_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pattern expresses up to 31 columns of statistics (cheap to compile); records of wider
    tables go to fastavro until ESCALATE_AFTER of them did, then the full pattern takes them."""
    monkeypatch.setattr(reach_decode, "ESCALATE_AFTER", 300)
    rng = random.Random("wide")
    wide = [_entry(rng, columns=6, longest=200) for _ in range(200)]
    for record in wide:
        cols = range(1, 61)
        record["data_file"]["value_counts"] = [{"key": c, "value": 5} for c in cols]
    data = _avro(MANIFEST_SCHEMA, wide, "deflate")
    want = [r["data_file"]["file_path"] for r in wide if r["status"] != 2]
    plan = reach_decode.MANIFEST_PLANS.get(fastavro.reader(io.BytesIO(data)).metadata["avro.schema"].encode())
    assert decode_manifest_live_paths(data, "m.avro") == want
    assert plan.limits is reach_decode.SMALL_LIMITS and plan.fell_back == 200
    assert decode_manifest_live_paths(data, "m.avro") == want  # 400 fell back: escalated
    assert plan.limits is reach_decode.ICEBERG_LIMITS and plan.scanner is not None
    container = avro_blocks.split_container(data)
    matched = sum(len(plan.scanner.scan(b, c)[0]) for c, b in avro_blocks.iter_blocks(container))
    assert matched == 200  # every record now expressed by the pattern
    assert decode_manifest_live_paths(data, "m.avro") == want


def test_corrupt_manifests_are_refused_by_the_live_path_decode() -> None:
    rng = random.Random("corrupt-paths")
    data = _avro(MANIFEST_SCHEMA, [_entry(rng, 5, 200) for _ in range(300)], "deflate", block_records=1)
    for broken in (data[: len(data) * 2 // 3], data[:60] + b"\x00\xff" * 500):
        with pytest.raises(CorruptMetadataError, match="not a valid manifest") as raised:
            decode_manifest_live_paths(broken, "s3://b/t/metadata/m9.avro")
        assert "m9.avro" in str(raised.value)


# -- manifest lists of fast appends ----------------------------------------------------------------


@pytest.mark.parametrize("block_records", [1000, 3], ids=["one-block", "blocks-of-3"])
@pytest.mark.parametrize("codec", ["null", "deflate", "zstandard"])
def test_fast_append_lists_decode_only_their_new_rows(codec: str, block_records: int) -> None:
    rng = random.Random(f"chain-{codec}-{block_records}")
    schema = _list_schema(True)
    rows: list[dict] = []
    parent = None
    own_counts = []
    for k in range(25):
        new = [_manifest_row(rng, True, longest=200) for _ in range(1 + k % 3)]
        rows = new + rows  # a fast append: the new manifests first, then the parent's rows unchanged
        data = _avro(schema, rows, codec, block_records=block_records)
        shared = decode_manifest_list_shared(data, f"snap-{k}.avro", parent)
        assert shared.rows == reference_decode_manifest_list(data, "snap.avro")
        assert shared.rows == decode_manifest_list(data, "snap.avro")
        own_counts.append(shared.own)
        if parent is not None:
            assert shared.own == len(new), k  # only the new rows were decoded
        parent = shared
    assert own_counts[0] == 1
    # An unrelated parent (its bytes do not close the list): the whole list is decoded.
    other = decode_manifest_list_shared(
        _avro(schema, [_manifest_row(rng, True, 200) for _ in range(4)], codec), "snap-x.avro"
    )
    data = _avro(schema, rows, codec, block_records=block_records)
    again = decode_manifest_list_shared(data, "snap-y.avro", other)
    assert again.rows == reference_decode_manifest_list(data, "snap.avro") and again.own == len(rows)


def test_a_parent_list_of_another_writer_schema_is_never_carried_over() -> None:
    """Equal bytes mean equal rows only under one schema: a child written with another schema (here the
    same fields under another record name, so the bytes agree) is decoded whole, never read as its
    parent's rows."""
    rng = random.Random("other-schema")
    schema = _list_schema(True)
    renamed = {**schema, "name": "manifest_file_renamed"}
    base = [_manifest_row(rng, True, longest=200) for _ in range(20)]
    parent = decode_manifest_list_shared(_avro(schema, base, "deflate"), "snap-1.avro")
    new = [_manifest_row(rng, True, longest=200)]
    same = _avro(schema, new + base, "deflate")
    assert decode_manifest_list_shared(same, "snap-2.avro", parent).own == 1  # shared under one schema
    data = _avro(renamed, new + base, "deflate")
    child = decode_manifest_list_shared(data, "snap-2.avro", parent)
    assert child.rows == reference_decode_manifest_list(data, "snap-2.avro")
    assert child.own == len(child.rows) == 21


def test_a_list_whose_new_rows_the_pattern_cannot_express_is_decoded_whole() -> None:
    rng = random.Random("odd-head")
    schema = _list_schema(True)
    base = [_manifest_row(rng, True, longest=200) for _ in range(20)]
    parent = decode_manifest_list_shared(_avro(schema, base, "deflate"), "snap-1.avro")
    odd = _manifest_row(rng, True, longest=200)
    odd["manifest_path"] = "s3://bucket/" + "x" * 1500 + "-m0.avro"  # longer than the pattern expresses
    data = _avro(schema, [odd, *base], "deflate")
    child = decode_manifest_list_shared(data, "snap-2.avro", parent)
    assert child.rows == reference_decode_manifest_list(data, "snap-2.avro")
    assert child.rows[0].path == odd["manifest_path"] and child.own == len(child.rows)


# -- the valid set -------------------------------------------------------------------------------

LOCATIONS = [
    "s3a://bucket/wh/t/data/a.parquet",
    "s3://bucket/wh/t/data/b.parquet",
    "s3n://Bucket/wh/t/data/c.parquet",
    "s3://other/wh/t/data/a.parquet",
    "file:/wh/t/data/p=1/d.parquet",
    "file:///wh/t/data/p=1/e.parquet",
    "/wh/t/data/p=1/f.parquet",
    "/wh/.work/t/data/g.parquet",
    "/wh/t/./data/h.parquet",
    "/wh/t/data/../data/i.parquet",
    "/wh//t/data/j.parquet",
    "/wh/t/data/k/",
    "/wh/t/data/.",
    "/wh/t/data/..",
    "relative/x.parquet",
    "x.parquet",
    "s3://bucket/",
    "s3://bucket",
    "hdfs://nn1:8020/wh/t/data/a.parquet",
]


def test_the_valid_set_built_in_bulk_is_the_one_built_location_by_location() -> None:
    normaliser = LocationNormaliser(equal_authorities={"nn1:8020": "ns"})
    one, bulk = ValidLocations(normaliser), ValidLocations(normaliser)
    for location in LOCATIONS:
        one.add(location)
    assert bulk.add_all(LOCATIONS) == len(LOCATIONS)
    assert len(one) == len(bulk) > 10
    paths = {normaliser.parse(location).path for location in LOCATIONS} | {"/wh/t/data/zz.parquet"}
    for path in paths:
        assert (path in one) == (path in bulk), path
        assert one.prefixes_of(path) == bulk.prefixes_of(path), path
        for scheme, authority in [("s3", "bucket"), ("file", None), (None, None), ("hdfs", "ns")]:
            uri = FileURI(scheme, authority, path)
            assert one.classify(uri) == bulk.classify(uri), (path, scheme, authority)
    assert one.classify(FileURI("s3", "bucket", "/wh/t/data/a.parquet")) == "valid"
    assert one.classify(FileURI("s3", "bucket", "/wh/t/data/h.parquet")) == "valid"  # /wh/t/./data
    assert one.classify(FileURI("s3", "elsewhere", "/wh/t/data/b.parquet")) == "mismatch"
    assert bulk.spellings_in("/wh/t/data/") == {
        ("s3", "bucket"),
        ("s3", "other"),
        (None, None),
        ("hdfs", "ns"),
    }


def test_a_directory_is_resolved_once_across_many_add_all_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """Orphan cleanup adds each manifest's paths in its own call; the partitions recur in every manifest,
    so a directory spelling is resolved once for the set's life, and the set is the one built path by path."""
    normaliser = LocationNormaliser(equal_authorities={"nn1:8020": "ns"})
    one, chunked = ValidLocations(normaliser), ValidLocations(normaliser)
    resolved: list[str] = []
    original = ValidLocations._resolve_directory

    def counting(self: ValidLocations, directory: str) -> Any:
        resolved.append(directory)
        return original(self, directory)

    monkeypatch.setattr(ValidLocations, "_resolve_directory", counting)
    manifests = [[*LOCATIONS[i::3], f"s3://bucket/wh/t/data/p={i % 2}/{i}.parquet"] for i in range(6)]
    for chunk in manifests:
        for location in chunk:
            one.add(location)
        chunked.add_all(chunk)
    assert len(one) == len(chunked)
    for chunk in manifests:
        for location in chunk:
            path = normaliser.parse(location).path
            assert (path in one) == (path in chunked), location
            assert one.prefixes_of(path) == chunked.prefixes_of(path), location
    assert len(resolved) == len(set(resolved))  # never twice
    assert "s3://bucket/wh/t/data/p=0/" in resolved and "s3://bucket/wh/t/data/p=1/" in resolved


# -- the local name listing ----------------------------------------------------------------------


def test_names_added_by_directory_are_the_locations_added_one_by_one() -> None:
    """``add_grouped`` (the forked child's paths, grouped by directory) gives the set ``add`` gives, with
    names held before under another spelling, duplicates, special names and directories not in normal form."""
    normaliser = LocationNormaliser(equal_authorities={"nn1:8020": "ns"})
    one, grouped = ValidLocations(normaliser), ValidLocations(normaliser)
    first = LOCATIONS[::2]
    for location in first:
        one.add(location)
    grouped.add_all(first)  # held before: the group below adds spellings to some of these names
    by_directory: dict[str, list[str]] = {}
    later = [*LOCATIONS, "s3://bucket/wh/t/data/a.parquet", "s3://bucket/wh/t/data/new.parquet"]
    for location in later:
        cut = location.rfind("/") + 1
        by_directory.setdefault(location[:cut], []).append(location[cut:])
        one.add(location)
    given = grouped.add_grouped([(d, "\0".join(names)) for d, names in by_directory.items()])
    assert given == len(later)
    assert len(one) == len(grouped)
    paths = {normaliser.parse(location).path for location in later} | {"/wh/t/data/zz.parquet"}
    for path in paths:
        assert (path in one) == (path in grouped), path
        assert one.prefixes_of(path) == grouped.prefixes_of(path), path
        for scheme, authority in [
            ("s3", "bucket"),
            ("s3", "other"),
            ("file", None),
            (None, None),
            ("hdfs", "ns"),
        ]:
            uri = FileURI(scheme, authority, path)
            assert one.classify(uri) == grouped.classify(uri), (path, scheme, authority)
    assert {("s3", "bucket"), ("s3", "other")} <= set(grouped.prefixes_of("/wh/t/data/a.parquet"))


def _touch(path: Path, age_days: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    when = time.time() - age_days * 86400
    os.utime(path, (when, when))
    return path


@pytest.mark.parametrize("split", [False, True], ids=["one-process", "ages-half-in-a-child"])
def test_the_name_listing_reads_ages_only_of_files_the_valid_set_lacks(
    tmp_path: Path, split: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    forks: list[int] = []
    if split:  # every age read is split, the first half read in a forked child
        real_fork = os.fork
        monkeypatch.setattr(orphan_local, "FORKED_LSTAT_MIN", 1)
        monkeypatch.setattr(forked, "fork_allowed", lambda: True)
        monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    root = tmp_path / "t"
    valid_old = _touch(root / "data" / "p=1" / "valid-old.parquet", 10)
    valid_new = _touch(root / "data" / "p=1" / "valid-new.parquet", 0)
    orphan_old = _touch(root / "data" / "p=1" / "orphan-old.parquet", 10)
    _touch(root / "data" / "p=1" / "orphan-new.parquet", 0)
    elsewhere = _touch(root / "data" / "p=2" / "valid-on-s3.parquet", 10)
    in_bucket_dir = _touch(root / "data" / "_bucket=3" / "orphan.parquet", 10)
    for hidden in ("data/p=1/_SUCCESS", "data/p=1/.orphan-old.parquet.crc", "data/_temporary/0/x.parquet"):
        _touch(root / hidden, 10)
    names = list_local_names([str(root)], HiddenFilter(["_bucket"]))
    assert names.files_listed == 6 and names.hidden == 3

    valid = ValidLocations(LocationNormaliser())
    valid.add_all([f"file:{valid_old}", str(valid_new), f"s3://bucket{elsewhere}"])
    cutoff = time.time() - 86400
    listing = resolve_local_names(names, valid, cutoff)
    assert {c.path for c in listing.candidates} == {str(orphan_old), str(elsewhere), str(in_bucket_dir)}
    # Absent from the valid set: orphans without a second look-up; the one held under s3 is not.
    assert listing.unreferenced == {str(orphan_old), str(in_bucket_dir)}
    # The recent valid file was never looked at; the recent orphan was, and is too recent.
    assert listing.too_recent == 1 and listing.files_listed == 6 and listing.hidden == 3
    # ``candidates`` counts the two valid files too (unaged), as a listing with ages counts old ones.
    assert listing.valid_unaged == 2 and listing.counts_json()["candidates"] == 5
    assert all(c.mtime < cutoff and c.size == 1 for c in listing.candidates)
    assert valid.classify(FileURI("file", None, str(elsewhere))) == "mismatch"

    orphan_old.unlink()  # gone between the listing and the age read: simply no candidate
    again = resolve_local_names(names, valid, cutoff)
    assert str(orphan_old) not in {c.path for c in again.candidates} and again.files_listed == 5
    assert again.unreferenced == {str(in_bucket_dir)}
    assert len(forks) == (2 if split else 0)


# -- reachability over a real table ----------------------------------------------------------------


def test_shared_list_decoding_reaches_what_each_snapshot_reaches_alone(tmp_path: Path) -> None:
    from airflow_lakeformat.core.iceberg.reach.reachability import ReachabilityReader, reachable_files
    from tests.iceberg.scenarios import build

    scenario = build("hadoop", 2, tmp_path)
    table = scenario.table
    snapshots = table.metadata.snapshots
    reader = ReachabilityReader(table)
    together = reachable_files(table, snapshots, reader=reader)
    alone: set[str] = set()
    for snapshot in snapshots:
        alone |= reachable_files(table, [snapshot], reader=ReachabilityReader(table)).all_paths()
    assert together.all_paths() == alone
    assert reader.own_rows, "pyiceberg's fast appends carry the parent's rows: some lists were shared"
    for location, (parent, own) in reader.own_rows.items():
        assert reader.manifests_of_many([s for s in snapshots if s.manifest_list == location])[0][own:] == (
            decode_manifest_list(Path(parent.removeprefix("file:")).read_bytes(), parent)
        )


def test_the_kind_of_an_orphan_is_its_directorys_unless_under_metadata() -> None:
    """``classify`` takes an orphan's kind from its directory (once per directory) except under the
    metadata directory, where the name decides: the same kinds as ``kind_of`` path by path."""
    from airflow_lakeformat.core.iceberg.maintenance.orphan_plan import _kind_of_directory, kind_of

    metadata_dir, data_dirs = "/wh/t/metadata", ("/wh/t/data", "/wh/elsewhere/data/")
    paths = [
        "/wh/t/metadata/v3.metadata.json",
        "/wh/t/metadata/snap-1-1-a.avro",
        "/wh/t/metadata/a-m0.avro",
        "/wh/t/metadata/stats/x.puffin",
        "/wh/t/metadata/notes.txt",
        "/wh/t/data/p=1/a.parquet",
        "/wh/t/data/a.parquet",
        "/wh/t/data-old/a.parquet",
        "/wh/t/metadata-old/snap-1.avro",
        "/wh/elsewhere/data/q/a.parquet",
        "/wh/t/other/a.parquet",
    ]
    for path in paths:
        directory = path[: path.rfind("/") + 1]
        kind = _kind_of_directory(directory, metadata_dir, data_dirs)
        assert (kind or kind_of(path, metadata_dir, data_dirs)) == kind_of(path, metadata_dir, data_dirs), (
            path
        )
        assert (kind is None) == path.startswith("/wh/t/metadata/"), path
