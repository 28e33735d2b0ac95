"""Concurrent writers, ours and Java Iceberg 1.10.2's, on one table; and why they share a JDBC catalog.

**Hadoop layout: Java's commit does not exclude ours.** Java's ``HadoopTableOperations.renameToFinal``
takes an in-JVM lock, checks ``fs.exists(v<N+1>.metadata.json)``, then ``fs.rename(temp, v<N+1>)``. On a
local file system the rename is POSIX ``rename(2)``, which REPLACES an existing target. Our commit creates
``v<N+1>`` exclusively (``os.link``), so Java's commits exclude ours (our create fails when Java's file is
there) but not the other way round: a commit of ours that lands between Java's check and its rename is
overwritten, although ``append`` reported success. :func:`test_java_hadoop_commit_overwrites_ours_on_local_fs`
makes that window deterministic (a Hadoop ``LocalFileSystem`` subclass pauses the rename) and shows the lost
commit. Mixed Java/our writers on a Hadoop-layout table are therefore unsafe, whatever we do.

**JDBC catalog: both sides compare-and-swap.** Java's ``JdbcCatalog`` and pyiceberg's ``SqlCatalog`` commit
with ``UPDATE iceberg_tables SET metadata_location = new WHERE ... AND metadata_location = base`` on the same
SQLite file, so exactly one writer wins each version and the others retry. The mixed-writer test runs there,
in ONE Spark session (create, Java's writers, then Java's views once ours are done):

* 4 writers x 25 commits of 2 rows: 2 Java writers (JVM threads of the oracle, ``append-loop``: Java's
  fast append and retry) and 2 of ours (threads calling our ``append``, i.e. the one retry loop), each
  commit tagged with ``lakeformat.writer`` / ``lakeformat.seq`` in its snapshot summary;
* in 5 rounds of 5 commits per writer: after each round every writer stands still at a barrier while we
  compact the manifests through the CLI (full, minor, full, minor), so that compactions land between
  commits whatever the timing;
* from round 3 on, a background thread also runs our full and minor compactions WHILE the writers commit
  (a conflict makes it rebuild the compaction on the new head; when it lands is up to the scheduler, so
  the assertions only ask that whatever landed lost nothing).

Afterwards, read by Java: every (writer, seq, k) row exactly once; each commit exactly one ``append``
snapshot in one chain of snapshots; at EVERY snapshot Java's live files are its parent's plus exactly the
one file that commit wrote (an append) or exactly its parent's (our ``replace``); the summary totals follow
(+1 file and +2 records per append, unchanged by a replace; 100 files and 200 records at the head); 25
live files per writer; Java's live files equal ours at every snapshot, and at the head Java's ``files``
metadata table equals ``lakeformat files --json``.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.maintenance.manifest_compaction import compact_manifests
from airflow_lakeformat.core.iceberg.metadata.files import files_document
from airflow_lakeformat.core.iceberg.write.commit import RetryPolicy
from airflow_lakeformat.core.iceberg.write.write import append
from tests.support.java_iceberg import (
    JDBC_CATALOG,
    BackgroundOracle,
    compile_pausing_filesystem,
    pausing_filesystem_conf,
    start_oracle,
)
from tests.unit.test_cli import run

pytestmark = [pytest.mark.interop, pytest.mark.slow]

COMMITS = 25
ROUNDS = 5
PER_ROUND = COMMITS // ROUNDS
ROWS_PER_COMMIT = 2
JAVA_WRITERS = ("java-1", "java-2")
OUR_WRITERS = ("ours-1", "ours-2")
WRITERS = JAVA_WRITERS + OUR_WRITERS
BARRIER_MODES = {1: "full", 2: "minor", 3: "full", 4: "minor"}  # the compaction after round k (1-based)
BACKGROUND_FROM_ROUND = 3  # the background compactor runs during rounds 3, 4 and 5
NAMESPACE = "jdb"
WRITER_PROPERTY, SEQ_PROPERTY = "lakeformat.writer", "lakeformat.seq"
TABLE_PROPERTIES = {
    "format-version": "2",
    # Both sides read commit.retry.*: 4 writers + a compactor on one table need more than Java's 4 retries.
    "commit.retry.num-retries": "200",
    "commit.retry.min-wait-ms": "10",
    "commit.retry.max-wait-ms": "400",
    "commit.retry.total-timeout-ms": "600000",
    # "minor" (Java's merge rule) merges any bin of 2+ manifests, so that it has work at every barrier.
    "commit.manifest.min-count-to-merge": "2",
}


def _wait_for(path: Path, process: BackgroundOracle, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.process.poll() is not None:
            process.result()  # raises with the oracle's stderr
            raise AssertionError(f"the oracle ended before writing {path}")
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout} s"
        time.sleep(0.02)


# ---- Hadoop layout: Java's rename overwrites our exclusive create ---------------------------------


def test_java_hadoop_commit_overwrites_ours_on_local_fs(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    root = warehouse / "db" / "race"
    schema = pa.schema([("writer", pa.string()), ("seq", pa.int64()), ("k", pa.int64())])
    HadoopLayoutCatalog().create_table(str(root), schema=schema)
    ours = open_path_table(str(root))
    first = append(ours, pa.table({"writer": ["ours"], "seq": [0], "k": [0]}, schema=schema))
    version_before = sorted(p.name for p in (root / "metadata").glob("v*.metadata.json"))
    assert version_before == ["v1.metadata.json", "v2.metadata.json"]

    classes = compile_pausing_filesystem(tmp_path / "pausing-fs")
    pause = tmp_path / "pause"
    pause.mkdir()
    rows = tmp_path / "java-rows.json"
    rows.write_text(json.dumps([[{"writer": "java", "seq": 0, "k": 0}]]), encoding="utf-8")
    java = start_oracle(
        "append", "--table", "db.race", "--rows", rows,
        warehouse=warehouse, conf=pausing_filesystem_conf(classes, pause),
    )  # fmt: skip
    try:
        # Java has written its temporary metadata file, checked that v3 does not exist, and now renames.
        _wait_for(pause / "renaming", java)
        renaming = (pause / "renaming").read_text(encoding="utf-8")
        assert renaming.endswith("v3.metadata.json exists=false"), renaming
        # Our commit of v3 lands in that window: exclusive create succeeds, append reports success.
        lost = append(ours, pa.table({"writer": ["ours"], "seq": [1], "k": [0]}, schema=schema))
        assert open_path_table(str(root)).metadata.current_snapshot_id == lost
        (pause / "go").touch()
        java_snapshot = java.result(timeout=300)["snapshot_ids"][0]
    finally:
        java.stop()

    after = open_path_table(str(root))
    # Java's rename replaced OUR v3: our acknowledged commit is gone, Java's sits on our parent.
    assert sorted(p.name for p in (root / "metadata").glob("v*.metadata.json")) == [
        "v1.metadata.json", "v2.metadata.json", "v3.metadata.json"
    ]  # fmt: skip
    assert after.metadata.current_snapshot_id == java_snapshot
    assert after.metadata.snapshot_by_id(lost) is None
    assert after.metadata.snapshot_by_id(java_snapshot).parent_snapshot_id == first  # type: ignore[union-attr]
    rows_now = after.table.scan().to_arrow().to_pylist()
    assert sorted((r["writer"], r["seq"]) for r in rows_now) == [("java", 0), ("ours", 0)]


# ---- JDBC catalog: 2 Java writers, 2 of ours, our compactions between rounds and during them -------


def _cli_json(*argv: str) -> dict[str, Any]:
    code, out, err = run(*argv, "--json")
    assert code == 0, f"lakeformat {' '.join(argv)}: exit {code}\n{err}"
    document: dict[str, Any] = json.loads(out)
    return document


def _file_keys(files: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """Java's live files as (path, records, bytes, writer partition)."""
    return Counter(
        (f["file_path"], f["record_count"], f["file_size_in_bytes"], f["partition"]["writer"]) for f in files
    )


def _our_file_keys(document: dict[str, Any]) -> Counter[tuple[Any, ...]]:
    return Counter(
        (f["path"], f["recordCount"], f["fileSize"], f["partition"]["writer"]) for f in document["files"]
    )


class _Barrier:
    """The rounds: writers drop ``paused-<writer>-<round>`` files and wait for ``resume-<round>``."""

    def __init__(self, directory: Path, java: BackgroundOracle) -> None:
        self.directory = directory
        self.java = java
        self.resumed = {round_: threading.Event() for round_ in BARRIER_MODES}

    def pause(self, writer: str, round_: int) -> None:
        """Called by our writers (the Java ones do the same in the oracle)."""
        (self.directory / f"paused-{writer}-{round_}").write_text("paused", encoding="utf-8")
        if not self.resumed[round_].wait(300):
            raise TimeoutError(f"round {round_} was not resumed within 300 s")

    def failed(self, writer: str, error: str) -> None:
        (self.directory / f"failed-{writer}").write_text(error, encoding="utf-8")

    def wait_all(self, round_: int, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            missing = [w for w in WRITERS if not (self.directory / f"paused-{w}-{round_}").exists()]
            if not missing:
                return
            failures = {p.name: p.read_text(encoding="utf-8") for p in self.directory.glob("failed-*")}
            assert not failures, f"a writer failed before barrier {round_}: {failures}"
            if self.java.process.poll() is not None:
                self.java.result()
                raise AssertionError(f"the oracle ended before barrier {round_}")
            assert time.monotonic() < deadline, f"barrier {round_}: {missing} did not arrive in {timeout} s"
            time.sleep(0.01)

    def resume(self, round_: int) -> None:
        (self.directory / f"resume-{round_}").write_text("go", encoding="utf-8")
        self.resumed[round_].set()

    def release_all(self) -> None:
        """On the way out after a failure: nobody may wait forever."""
        for round_ in BARRIER_MODES:
            self.resume(round_)


def test_mixed_writers_and_compactions_on_a_shared_jdbc_table(tmp_path: Path) -> None:
    warehouse, catalog_db = tmp_path / "warehouse", tmp_path / "catalog.db"
    barrier_dir = tmp_path / "barrier"
    barrier_dir.mkdir()
    identifier = f"{JDBC_CATALOG}.{NAMESPACE}.conc"
    ours_name = f"{NAMESPACE}.conc"
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in TABLE_PROPERTIES.items())
    ready, go, done = tmp_path / "ready", tmp_path / "go", tmp_path / "done"
    loop = [
        "append-loop", "--table", identifier, "--count", str(COMMITS), "--rows-per-commit", str(ROWS_PER_COMMIT),
        "--ready-file", str(ready), "--go-file", str(go),
        "--pause-every", str(PER_ROUND), "--pause-dir", str(barrier_dir),
        *(arg for writer in JAVA_WRITERS for arg in ("--writer", writer)),
    ]  # fmt: skip
    commands = [
        ["sql", "--statement", f"CREATE NAMESPACE IF NOT EXISTS {JDBC_CATALOG}.{NAMESPACE}",
         "--statement", f"CREATE TABLE {identifier} (writer STRING, seq BIGINT, k BIGINT) USING iceberg"
                        f" PARTITIONED BY (writer) TBLPROPERTIES ({properties})"],
        loop,
        ["wait-file", "--path", str(done)],  # until ours are done too; then Java's views, same session
        ["rows", "--table", identifier],
        ["files", "--table", identifier, "--all", "--source", "java"],
        ["snapshots", "--table", identifier],
        ["files", "--table", identifier],  # the `files` metadata table (Spark SQL) at the head
    ]  # fmt: skip
    java = start_oracle("batch", warehouse=warehouse, catalog_db=catalog_db, stdin=json.dumps(commands))
    catalog_properties = {"type": "sql", "uri": f"sqlite:///{catalog_db}", "warehouse": warehouse.as_uri()}
    catalog_args = [
        "--catalog", JDBC_CATALOG,
        *(arg for k, v in catalog_properties.items() for arg in ("--catalog-property", f"{k}={v}")),
    ]  # fmt: skip

    def open_ours() -> Any:
        return open_catalog_table(ours_name, catalog_name=JDBC_CATALOG, catalog_properties=catalog_properties)

    barrier = _Barrier(barrier_dir, java)
    errors: list[str] = []
    background: list[dict[str, Any]] = []
    barriers: dict[int, dict[str, Any]] = {}
    background_on, stop, compactor_lock = threading.Event(), threading.Event(), threading.Lock()

    def our_writer(writer: str) -> None:
        try:
            table = open_ours()
            schema = table.table.schema().as_arrow()
            for seq in range(COMMITS):
                rows = {"writer": [writer] * ROWS_PER_COMMIT, "seq": [seq] * ROWS_PER_COMMIT,
                        "k": list(range(ROWS_PER_COMMIT))}  # fmt: skip
                append(table, pa.table(rows, schema=schema),
                       snapshot_properties={WRITER_PROPERTY: writer, SEQ_PROPERTY: str(seq)})  # fmt: skip
                if (seq + 1) % PER_ROUND == 0 and seq + 1 < COMMITS:
                    barrier.pause(writer, (seq + 1) // PER_ROUND)
        except Exception as exc:
            errors.append(f"{writer}: {type(exc).__name__}: {exc}")
            barrier.failed(writer, errors[-1])

    def background_compactor() -> None:
        """Full and minor compactions, one after the other, while ``background_on`` (writers committing)."""
        table = open_ours()
        policy = RetryPolicy.from_properties(table.metadata.properties)
        index = 0
        while not stop.is_set():
            if not background_on.wait(0.05):
                continue
            with compactor_lock:
                if not background_on.is_set():
                    continue
                mode = ("full", "minor")[index % 2]
                index += 1
                try:
                    table.refresh()
                    result = compact_manifests(table, mode, policy=policy)  # type: ignore[arg-type]
                except Exception as exc:
                    errors.append(f"background compactor ({mode}): {type(exc).__name__}: {exc}")
                    return
                background.append({"mode": mode, **result.to_json()})
            time.sleep(0.05)

    def barrier_compaction(round_: int, mode: str) -> dict[str, Any]:
        manifests = _cli_json("manifests", ours_name, *catalog_args)
        data = [m for m in manifests["manifests"] if m["content"] == "data"]
        document = _cli_json("compact-manifests", ours_name, *catalog_args, f"--{mode}")
        return {"round": round_, "mode": mode, "dataManifestsBefore": len(data),
                "headBefore": manifests["snapshot"], **document}  # fmt: skip

    writers = [threading.Thread(target=our_writer, args=(w,), daemon=True) for w in OUR_WRITERS]
    compactor = threading.Thread(target=background_compactor, daemon=True)
    try:
        _wait_for(ready, java)
        go.touch()
        started = time.monotonic()
        for thread in writers:
            thread.start()
        compactor.start()
        for round_, mode in BARRIER_MODES.items():
            barrier.wait_all(round_)  # every writer stands still after round `round_`
            with compactor_lock:  # ... and so does the background compactor
                background_on.clear()
                barriers[round_] = barrier_compaction(round_, mode)
                if round_ + 1 >= BACKGROUND_FROM_ROUND:
                    background_on.set()
            barrier.resume(round_)
        for thread in writers:
            thread.join(timeout=600)
        stop.set()
        compactor.join(timeout=600)
        seconds = time.monotonic() - started
        done.touch()
        results = java.result(timeout=600)
    finally:
        stop.set()
        barrier.release_all()
        done.touch()
        java.stop()
    _, loop_result, _, rows, java_files, snapshots, head_files_sql = results
    report = loop_result["writers"]
    print(f"{seconds:.1f} s; java: {report}; barriers: "
          f"{[(b['mode'], b['snapshotId'] is not None) for b in barriers.values()]}; background: "
          f"{[(c['mode'], c['snapshotId'] is not None) for c in background]}")  # fmt: skip
    assert errors == []
    for writer in JAVA_WRITERS:
        assert report[writer]["error"] is None, report[writer]
        assert report[writer]["commits"] == COMMITS

    # Every commit's rows exactly once: 100 commits of 2 rows, 50 per writer.
    expected = Counter((w, s, k) for w in WRITERS for s in range(COMMITS) for k in range(ROWS_PER_COMMIT))
    assert Counter((r["writer"], r["seq"], r["k"]) for r in rows) == expected

    # Every commit is exactly one append snapshot, and the snapshots form one chain.
    chain = sorted(snapshots["snapshots"], key=lambda s: s["sequence_number"])
    assert [s["sequence_number"] for s in chain] == list(range(1, len(chain) + 1))
    assert chain[0]["parent_id"] is None
    for parent, child in itertools.pairwise(chain):
        assert child["parent_id"] == parent["snapshot_id"], child
    assert snapshots["current_snapshot_id"] == chain[-1]["snapshot_id"]
    appends = [s for s in chain if s["operation"] == "append"]
    commits = Counter((s["summary"][WRITER_PROPERTY], int(s["summary"][SEQ_PROPERTY])) for s in appends)
    assert commits == Counter((w, s) for w in WRITERS for s in range(COMMITS))
    replaces = [s["snapshot_id"] for s in chain if s["operation"] == "replace"]
    assert len(appends) + len(replaces) == len(chain), Counter(s["operation"] for s in chain)

    # The rounds: each barrier separates the rounds of every writer, and our compactions land in between.
    position = {s["snapshot_id"]: i for i, s in enumerate(chain)}

    def round_of(snapshot: dict[str, Any]) -> int:
        return int(snapshot["summary"][SEQ_PROPERTY]) // PER_ROUND

    for round_, mode in BARRIER_MODES.items():
        last_before = max(position[s["snapshot_id"]] for s in appends if round_of(s) == round_ - 1)
        first_after = min(position[s["snapshot_id"]] for s in appends if round_of(s) == round_)
        assert last_before < first_after, f"barrier {round_} did not hold"
        gap = [s["snapshot_id"] for s in chain[last_before + 1 : first_after]]
        assert gap and all(chain[position[g]]["operation"] == "replace" for g in gap), (round_, gap)
        at_barrier = barriers[round_]
        committed = at_barrier["snapshotId"] is not None
        assert at_barrier["mode"] == mode
        # It compacted the head left by the round (and by any background compaction landed since) and was
        # the last commit before the next round.
        assert at_barrier["headBefore"] == chain[first_after - (2 if committed else 1)]["snapshot_id"]
        if committed:
            assert at_barrier["merge"] == mode and gap[-1] == at_barrier["snapshotId"], at_barrier
        else:  # only if a background compaction had compacted everything after the round's last commit
            assert round_ >= BACKGROUND_FROM_ROUND and at_barrier["dataManifestsBefore"] == 1, at_barrier
        if round_ < BACKGROUND_FROM_ROUND:  # no background compactor yet: the barrier's is the only one
            assert gap == [at_barrier["snapshotId"]], (round_, gap)
    # Every replace snapshot is one of our compactions, and every compaction that committed is in the chain.
    landed = [b["snapshotId"] for b in barriers.values()] + [c["snapshotId"] for c in background]
    assert sorted(x for x in landed if x is not None) == sorted(replaces)

    # At EVERY snapshot (Java's view): an append adds exactly its one file to its parent's live files, a
    # replace keeps them exactly; the summary totals agree.
    by_snapshot = java_files["snapshots"]
    previous: Counter[tuple[Any, ...]] = Counter()
    totals = {"total-data-files": 0, "total-records": 0}
    for snapshot in chain:
        files = _file_keys(by_snapshot[str(snapshot["snapshot_id"])])
        summary = snapshot["summary"]
        if snapshot["operation"] == "append":
            added = files - previous
            assert files - added == previous, f"{snapshot['snapshot_id']}: an append lost a file"
            assert [(records, writer) for _, records, _, writer in added] == [
                (ROWS_PER_COMMIT, summary[WRITER_PROPERTY])
            ], (snapshot, added)
            assert summary["added-data-files"] == "1"
            assert summary["added-records"] == str(ROWS_PER_COMMIT)
            totals = {"total-data-files": totals["total-data-files"] + 1,
                      "total-records": totals["total-records"] + ROWS_PER_COMMIT}  # fmt: skip
        else:
            assert files == previous, f"replace {snapshot['snapshot_id']} changed the live files"
        assert {k: int(summary[k]) for k in totals} == totals, snapshot
        previous = files
    assert totals == {"total-data-files": len(WRITERS) * COMMITS,
                      "total-records": len(WRITERS) * COMMITS * ROWS_PER_COMMIT}  # fmt: skip
    assert Counter(writer for *_, writer in previous.elements()) == dict.fromkeys(WRITERS, COMMITS)

    # Ours at every snapshot equals Java's; at the head through the CLI, equal to Java's `files` table too.
    table = open_ours()
    for snapshot in chain:
        ours = _our_file_keys(files_document(table, snapshot_id=snapshot["snapshot_id"]))
        assert ours == _file_keys(by_snapshot[str(snapshot["snapshot_id"])]), snapshot["snapshot_id"]
    head = _our_file_keys(_cli_json("files", ours_name, *catalog_args))
    assert head == _file_keys(head_files_sql) == previous
