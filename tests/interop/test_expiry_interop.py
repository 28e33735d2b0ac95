"""Snapshot expiry of pypaimon-written tables, locally and on SeaweedFS S3.

The reference sets come from the metadata before expiry, not from the expiry code: a file that a
retained snapshot or a tag references must survive; a file that only expired snapshots reference must
be gone, and nothing else may disappear. pypaimon (which has no expiry of its own) must read the same
rows afterwards at the latest snapshot, every retained snapshot and every tag. pypaimon reads only
local paths, so an S3 table is downloaded after each expiry and pypaimon reads that copy.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.paimon import paths
from airflow_lakeformat.core.paimon.live_files import live_files
from airflow_lakeformat.core.paimon.maintenance.expiry import SnapshotExpiryResult, expire_snapshots
from airflow_lakeformat.core.paimon.maintenance.manifest_compaction import compact_manifests
from airflow_lakeformat.core.paimon.maintenance.references import snapshot_references
from airflow_lakeformat.core.paimon.manifest import ManifestEntry, ManifestFileMeta, iter_added, merge_entries
from airflow_lakeformat.core.paimon.paths import DataFilePaths
from airflow_lakeformat.core.paimon.snapshot import Snapshot
from airflow_lakeformat.core.paimon.table import Table
from tests.support.pypaimon import oracle_build, run_oracle_batch
from tests.support.seaweedfs import SeaweedFSServer, upload_tree

pytestmark = pytest.mark.interop

HISTORY = "pk_overwrite_history"  # PK, 3 buckets, 3 partitions, overwrites, 2 tags, a consumer
MANY_COMMITS = "many_commits"  # 45 appends: after a full manifest compaction, manifests can expire
STORAGES = [pytest.param("local", id="local"), pytest.param("s3", id="s3", marks=pytest.mark.s3)]
RETAIN_MIN = 3


def future_clock() -> float:
    # Every snapshot was superseded long "ago" whatever the sandbox clock does meanwhile.
    return time.time() + 3 * 86400


# ---- reading rows through pypaimon -------------------------------------------------------------


def read_rows(requests: Sequence[tuple[str | Path, str]]) -> list[Any]:
    """pypaimon's rows for (table, selector) pairs, in one process; a selector is ``latest``,
    ``snapshot:<id>`` or ``tag:<name>``."""
    commands: list[list[str]] = []
    for path, selector in requests:
        kind, _, value = selector.partition(":")
        commands.append(["read", str(path)] + ([] if kind == "latest" else [f"--{kind}", value]))
    return run_oracle_batch(commands)


def selectors_for(snapshot_ids: list[int], tags: list[str]) -> list[str]:
    return ["latest", *(f"snapshot:{i}" for i in snapshot_ids), *(f"tag:{t}" for t in tags)]


@dataclass
class Pristine:
    paths: dict[str, Path]
    rows: dict[str, dict[str, Any]]  # table name -> selector -> rows, as pypaimon wrote them


def build_pristine(warehouse: Path, wanted: dict[str, Callable[[dict[str, Any]], list[str]]]) -> Pristine:
    """Build the scenario tables with pypaimon and read, in one more process, the versions that
    ``wanted[name](table summary)`` selects."""
    tables = oracle_build(warehouse, list(wanted))["tables"]
    requests = [(name, s) for name, pick in wanted.items() for s in pick(tables[name])]
    results = read_rows([(tables[name]["path"], s) for name, s in requests])
    rows: dict[str, dict[str, Any]] = {name: {} for name in wanted}
    for (name, selector), result in zip(requests, results, strict=True):
        rows[name][selector] = result
    return Pristine({name: Path(tables[name]["path"]) for name in wanted}, rows)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    """The tables, and pypaimon's rows at every version an expiry below retains (and the latest)."""

    def history_versions(summary: dict[str, Any]) -> list[str]:
        first_kept = min(summary["consumers"].values())
        return selectors_for([i for i in summary["snapshots"] if i >= first_kept], summary["tags"])

    return build_pristine(
        tmp_path_factory.mktemp("expiry-warehouse"),
        {HISTORY: history_versions, MANY_COMMITS: lambda _summary: ["latest"]},
    )


# ---- the table under test, local or on S3 ------------------------------------------------------


@dataclass
class Placed:
    """A private copy of a table on one storage, and a way to freeze its current state locally."""

    table: Table
    frozen_copy: Callable[[str], Path]


def s3_options(server: SeaweedFSServer) -> dict[str, Any]:
    return {
        "key": server.access_key,
        "secret": server.secret_key,
        "endpoint_url": server.endpoint_url,
        "client_kwargs": {"region_name": server.region},
    }


def place(storage: str, source: Path, tmp_path: Path, request: pytest.FixtureRequest) -> Placed:
    """Copy ``source`` to ``storage``. ``frozen_copy(label)`` puts the table's current state in a
    local directory, so pypaimon can read every round's result in one process at the end."""
    local = tmp_path / "tables" / source.name
    shutil.copytree(source, local)

    def target(label: str) -> Path:
        path = tmp_path / f"state-{label}" / source.name
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    if storage == "local":
        table = Table.open(str(local))
        return Placed(table, lambda label: Path(shutil.copytree(local, target(label))))
    server: SeaweedFSServer = request.getfixturevalue("seaweedfs")
    uri = f"{request.getfixturevalue('s3_bucket')}/wh/{source.name}"
    upload_tree(server.fs(), local, uri)
    s3_table = Table.open(uri, s3_options(server))

    def download(label: str) -> Path:
        path = target(label)
        s3_table.io.fs.get(s3_table.root + "/", str(path) + "/", recursive=True)
        return path

    return Placed(s3_table, download)


def tree(table: Table) -> dict[str, int]:
    """Every file under the table root: path relative to the root -> size."""
    found = table.io.fs.find(table.root, detail=True)
    prefix = table.root.rstrip("/") + "/"
    return {
        str(name)[len(prefix) :]: int(info["size"])
        for name, info in found.items()
        if info.get("type") != "directory"
    }


class References:
    """Every file a snapshot or tag references, from its metadata: relative path -> kind.

    Computed here from the manifests (each read once) rather than by the code under test.
    """

    def __init__(self, table: Table) -> None:
        self.table = table
        self.data_paths = DataFilePaths(table.schema)
        self._lists: dict[str, list[ManifestFileMeta]] = {}
        self._entries: dict[str, list[ManifestEntry]] = {}

    def _list(self, name: str) -> list[ManifestFileMeta]:
        if name not in self._lists:
            self._lists[name] = self.table.manifest_list(name)
        return self._lists[name]

    def _manifest(self, name: str) -> list[ManifestEntry]:
        if name not in self._entries:
            self._entries[name] = self.table.manifest(name)
        return self._entries[name]

    def of(self, snapshot: Snapshot) -> dict[str, str]:
        lists = [snapshot.base_manifest_list, snapshot.delta_manifest_list]
        if snapshot.changelog_manifest_list:
            lists.append(snapshot.changelog_manifest_list)
        out = {f"{paths.MANIFEST_DIR}/{name}": "manifest-list" for name in lists}
        data: dict[tuple[Any, ...], ManifestEntry] = {}
        for name in lists:
            for meta in self._list(name):
                out[f"{paths.MANIFEST_DIR}/{meta.file_name}"] = "manifest"
                for extra in meta.extra_files:
                    out[f"{paths.MANIFEST_DIR}/{extra}"] = "manifest"
                if name != snapshot.changelog_manifest_list:
                    merge_entries(self._manifest(meta.file_name), data)
        for entry in iter_added(data):
            out[self.data_paths.relative_path(entry)] = "data-file"
        if snapshot.index_manifest:
            out[f"{paths.MANIFEST_DIR}/{snapshot.index_manifest}"] = "index-manifest"
            for ref in snapshot_references(self.table, snapshot).index_files:
                out[f"{paths.INDEX_DIR}/{ref.file_name}"] = "index-file"
        if snapshot.statistics:
            out[f"{paths.STATISTICS_DIR}/{snapshot.statistics}"] = "statistics"
        return out


def assert_matches_core(table: Table, snapshot: Snapshot, refs: dict[str, str]) -> None:
    """The test's own reading agrees with the core's live files and metadata references."""
    data = {path for path, kind in refs.items() if kind == "data-file"}
    assert data == {f.path for f in live_files(table, snapshot)}, snapshot.id
    metadata = {path.rsplit("/", 1)[1] for path, kind in refs.items() if kind != "data-file"}
    assert metadata == snapshot_references(table, snapshot).all_file_names(), snapshot.id


# ---- one expiry, fully checked -----------------------------------------------------------------


@dataclass
class ExpiryCheck:
    """What an expiry must do, from the metadata before it ran; and pypaimon's rows to compare."""

    expected_end: int
    expired: list[int]
    retained: list[int]
    tags: list[str]
    keep: dict[str, str]
    gone: dict[str, str]
    before: dict[str, int]


def prepare(table: Table, expected_end: int) -> ExpiryCheck:
    """The files an expiry up to ``expected_end`` (exclusive) must keep and must delete, from the
    metadata: whatever a retained snapshot or a tag references stays, the rest of what the expired
    snapshots reference goes, together with their snapshot files."""
    manager = table.snapshot_manager
    ids = manager.list_snapshot_ids()
    expired = [i for i in ids if i < expected_end]
    retained = [i for i in ids if i >= expected_end]
    tags = manager.tags()
    references = References(table)
    keep: dict[str, str] = {}
    for snapshot in [*(manager.snapshot(i) for i in retained), *tags.values()]:
        keep.update(references.of(snapshot))
    for snapshot in [manager.snapshot(retained[-1]), *tags.values()]:
        assert_matches_core(table, snapshot, references.of(snapshot))
    referenced_by_expired: dict[str, str] = {}
    for i in expired:
        referenced_by_expired.update(references.of(manager.snapshot(i)))
    gone = {path: kind for path, kind in referenced_by_expired.items() if path not in keep}
    gone.update({f"{paths.SNAPSHOT_DIR}/{paths.SNAPSHOT_PREFIX}{i}": "snapshot" for i in expired})
    return ExpiryCheck(expected_end, expired, retained, sorted(tags), keep, gone, tree(table))


def expire_and_check(table: Table, check: ExpiryCheck, **kwargs: Any) -> SnapshotExpiryResult:
    """Dry run, then the real run; assert exactly the expected files went and the rest stayed."""
    dry = expire_snapshots(table, dry_run=True, older_than=timedelta(0), clock=future_clock, **kwargs)
    assert tree(table) == check.before, "a dry run changed the table"
    real = expire_snapshots(table, dry_run=False, older_than=timedelta(0), clock=future_clock, **kwargs)
    dry_json, real_json = dry.to_json(), real.to_json()
    for key in ("snapshotsExpired", "earliestBefore", "earliestAfter", "latest", "files", "bytes"):
        assert dry_json[key] == real_json[key], key
    assert dry_json["dryRun"] and not real_json["dryRun"]
    assert real_json["snapshotsExpired"] == check.expired
    assert real_json["earliestAfter"] == check.expected_end
    assert not real_json["failed"] and real_json["alreadyMissing"] == 0

    expected_counts: dict[str, int] = {}
    for kind in check.gone.values():
        expected_counts[kind] = expected_counts.get(kind, 0) + 1
    assert real_json["files"] == dict(sorted(expected_counts.items()))
    data_bytes = sum(check.before[p] for p, kind in check.gone.items() if kind == "data-file")
    assert real_json["bytes"].get("data-file", 0) == data_bytes

    after = tree(table)
    hint = f"{paths.SNAPSHOT_DIR}/{paths.EARLIEST}"
    assert set(check.before) - set(after) == set(check.gone), "exactly the expired-only files are gone"
    assert set(after) - set(check.before) <= {hint}, "expiry wrote nothing but the EARLIEST hint"
    missing = sorted(p for p in check.keep if p not in after)
    assert not missing, f"files of retained snapshots or tags were deleted: {missing}"
    manager = table.snapshot_manager
    assert manager.list_snapshot_ids() == check.retained
    assert manager.read_hint(paths.EARLIEST) == check.expected_end
    assert manager.earliest_snapshot_id() == check.expected_end
    return real


def advance_consumer(table: Table, consumer: str, next_snapshot: int) -> None:
    """What a streaming reader does when it moves on (Paimon's consumer file format)."""
    path = table.io.join(table.root, paths.CONSUMER_DIR, f"{paths.CONSUMER_PREFIX}{consumer}")
    table.io.write_bytes(path, json.dumps({"nextSnapshot": next_snapshot}).encode())


# ---- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("storage", STORAGES)
def test_expiry_keeps_pypaimon_rows_and_deletes_only_files_of_expired_snapshots(
    storage: str, pristine: Pristine, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    history = place(storage, pristine.paths[HISTORY], tmp_path, request)
    many = place(storage, pristine.paths[MANY_COMMITS], tmp_path, request)
    table = history.table
    manager = table.snapshot_manager
    latest = manager.latest_snapshot_id()
    assert latest is not None
    consumers = {c.consumer_id: c.next_snapshot for c in manager.consumers()}
    assert set(manager.tag_names()) == {"early", "mid"}
    consumer_next = consumers["reader"]
    # The consumer, not retain-min, must be what stops this expiry.
    assert consumer_next < latest - RETAIN_MIN + 1
    assert manager.tag("early").id < consumer_next < manager.tag("mid").id

    # Round 1: expiry stops right before the consumer's next snapshot. The retained boundary is an
    # overwrite, so its own DELETEs count; tag "early" holds files that the overwrites DELETEd.
    check1 = prepare(table, consumer_next)
    kinds = set(check1.gone.values())
    assert {"data-file", "manifest-list", "snapshot"} <= kinds, "the scenario must make expiry delete data"
    references = References(table)
    tag_held = {p for p, k in references.of(manager.tag("early")).items() if k == "data-file"}
    assert tag_held - set(references.of(manager.snapshot(consumer_next))), "the tag must hold dropped files"
    result1 = expire_and_check(table, check1, retain_min=RETAIN_MIN)
    assert result1.plan.kept_by_tags_or_branches > 0
    assert manager.snapshot_exists(consumer_next) and not manager.snapshot_exists(consumer_next - 1)

    # Manifest compaction first, so that the old manifests stop being used and can expire too.
    compacted = compact_manifests(many.table, "full")
    assert compacted.snapshot_id is not None
    check_many = prepare(many.table, compacted.snapshot_id)
    assert "manifest" in set(check_many.gone.values())
    expire_and_check(many.table, check_many, retain_min=1)

    history_round1 = history.frozen_copy("round1")
    many_after = many.frozen_copy("round1")
    assert compacted.snapshot_id == many.table.snapshot_manager.latest_snapshot_id()

    # Round 2: the consumer moved on, so retain-min decides; tag "mid" (now an expired snapshot)
    # still holds files that snapshot 10 DELETEd.
    advance_consumer(table, "reader", latest)
    check2 = prepare(table, latest - RETAIN_MIN + 1)
    assert "data-file" in set(check2.gone.values())
    result2 = expire_and_check(table, check2, retain_min=RETAIN_MIN)
    assert result2.plan.kept_by_tags_or_branches > 0
    history_round2 = history.frozen_copy("round2")

    # pypaimon reads every retained snapshot and tag after each round, in one process.
    requests = [(history_round1, s) for s in selectors_for(check1.retained, check1.tags)]
    requests += [(history_round2, s) for s in selectors_for(check2.retained, check2.tags)]
    requests += [(many_after, "latest")]
    got = read_rows(requests)
    for (copy, selector), rows in zip(requests[:-1], got[:-1], strict=True):
        assert rows == pristine.rows[HISTORY][selector], (copy.parent.name, selector)
    assert got[-1] == pristine.rows[MANY_COMMITS]["latest"]

    # Converged: a re-run finds nothing left to expire.
    again = expire_snapshots(
        table, dry_run=False, retain_min=RETAIN_MIN, older_than=timedelta(0), clock=future_clock
    )
    assert again.plan.expired_ids == [] and again.report.total_files == 0
