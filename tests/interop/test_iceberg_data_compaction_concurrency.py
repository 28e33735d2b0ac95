"""Our Iceberg DATA compaction against Java writers that insert, delete and update rows (merge-on-read) at once.

One table in the JDBC catalog that Java's ``JdbcCatalog`` and pyiceberg's ``SqlCatalog`` share (Hadoop-layout
tables are unsafe for mixed Java/our writers: ``test_iceberg_concurrency_interop.py``), partitioned by writer,
``write.delete.mode`` and ``write.update.mode`` merge-on-read, all in ONE Spark session of the oracle:

* 4 Java writers x 25 commits (``iceberg_oracle.py row-loop``, JVM threads): per 5 commits 3 inserts of 3 rows,
  1 delete and 1 update of one of the writer's earlier rows, each committed as Spark's merge-on-read
  DELETE/UPDATE commits it (a row delta with a file-scoped position delete, validated from the snapshot the
  row was located at; a commit of ours that removed that file makes Java re-locate the row and retry);
  every commit tagged with writer, seq, operation and target in its snapshot summary;
* 5 rounds of 5 commits per writer; after each round every writer stands still at a barrier while we compact
  through the CLI (``compact-data --min-input-files 2``: every partition's files into one);
* from round 2 on, a background thread compacts (``compact_data``) while the writers commit, one compaction
  after the other;
* one conflict is forced: during round 3, the first background compaction, between rewriting a group and
  committing, has Java delete a row of one of that group's input files (the oracle's triggered delete) and only
  then goes on; that group must not be committed (its rows would lose the delete) and must be named in the
  result's conflicts. Other conflicts happen or not, as the scheduler has it.

Afterwards, read by Java, against a model built from the commits Java reports (every insert, delete and update
of every writer, and the triggered deletes), replayed in the order of the snapshot chain:

* every commit of every writer is exactly one snapshot, in one chain; at EVERY snapshot Java's live files
  differ from its parent's by exactly what that commit wrote (an insert one data file of its rows, a delete
  one position-delete file, an update both; ours swap data files only);
* Java's rows at each of our ``replace`` snapshots and at its parent equal the model's there (so no commit of
  ours changed a row: no deleted row back, no row lost, no update undone), and at the head every inserted row
  is present unless deleted, deleted rows are absent, updated rows hold their final value. (Rows at the other
  snapshots cost a Spark job each, 0.4-0.7 s; what our commits could break shows at our snapshots.)
* the barrier compactions land between the rounds, conflict with nothing and leave one file per partition;
* every compaction that committed: the files it removed are exactly its committed groups' inputs; no group it
  committed had a position delete land on one of its files between its start and its commit (the validation),
  and every group it left out was really hit by such a delete, and is counted in its conflicts;
* some compactions replaced files (not a vacuous run), and the forced conflict is reported by the compaction
  that was held.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_lakeformat.core.errors import CommitConflictError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table
from airflow_lakeformat.core.iceberg.maintenance import data_compaction_run
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import compact_data
from airflow_lakeformat.core.iceberg.write.commit import RetryPolicy
from tests.support.java_iceberg import JDBC_CATALOG, run_oracle_batch
from tests.unit.test_cli import run

pytestmark = [pytest.mark.interop, pytest.mark.slow]

WRITERS = ("java-1", "java-2", "java-3", "java-4")
COMMITS, ROUNDS, ROWS_PER_INSERT = 25, 5, 3
PER_ROUND = COMMITS // ROUNDS
BARRIERS = range(1, ROUNDS)  # the compaction after round k (1-based)
BACKGROUND_FROM_ROUND, FORCED_ROUND = 2, 3
NAMESPACE, TABLE = "jdb", "dc"
OPTIONS = {"min-input-files": "2"}
TABLE_PROPERTIES = {
    "format-version": "2",
    "write.delete.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    # 4 writers and a compactor on one table need more than Java's 4 retries (both sides read commit.retry.*)
    "commit.retry.num-retries": "200",
    "commit.retry.min-wait-ms": "10",
    "commit.retry.max-wait-ms": "400",
    "commit.retry.total-timeout-ms": "600000",
}
TAG = "lakeformat."


def _norm(path: str) -> str:
    """A data file path as Java and we may spell it (``file:/x``, ``file:///x``)."""
    return "/" + path.removeprefix("file:").lstrip("/")


class _JavaBatch:
    """The oracle's commands, run by this process's shared oracle server from a thread (the server's Spark
    session is already up when earlier interop tests ran; the JVM start is not paid again)."""

    def __init__(self, commands: list[list[str]], warehouse: Path, catalog_db: Path) -> None:
        self.results: list[Any] = []
        self.error: BaseException | None = None

        def run_batch() -> None:
            try:
                self.results = run_oracle_batch(commands, warehouse=warehouse, catalog_db=catalog_db)
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run_batch, name="java-batch", daemon=True)
        self.thread.start()

    def check(self) -> None:
        """Raise the oracle's error, if it ended with one."""
        if self.error is not None:
            raise self.error

    def alive(self) -> bool:
        self.check()
        return self.thread.is_alive()

    def result(self, timeout: float) -> list[Any]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the oracle did not answer within {timeout} s"
        self.check()
        return self.results


def _wait_for(path: Path, java: _JavaBatch, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if not java.alive():
            raise AssertionError(f"the oracle ended before writing {path}")
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout} s"
        time.sleep(0.02)


class _Rounds:
    """The barrier of ``row-loop``: writers drop ``paused-<writer>-<round>``, wait for ``resume-<round>``."""

    def __init__(self, directory: Path, java: _JavaBatch) -> None:
        self.directory, self.java = directory, java

    def wait_all(self, round_: int, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while any(not (self.directory / f"paused-{w}-{round_}").exists() for w in WRITERS):
            failures = {p.name: p.read_text(encoding="utf-8") for p in self.directory.glob("failed-*")}
            assert not failures, f"a writer failed before barrier {round_}: {failures}"
            if not self.java.alive():
                raise AssertionError(f"the oracle ended before barrier {round_}")
            assert time.monotonic() < deadline, f"barrier {round_} not reached in {timeout} s"
            time.sleep(0.01)

    def resume(self, round_: int) -> None:
        (self.directory / f"resume-{round_}").write_text("go", encoding="utf-8")

    def release_all(self) -> None:
        for round_ in BARRIERS:
            self.resume(round_)


class _Compactor:
    """The background compactions, and the forced conflict between one's rewrite and its commit."""

    def __init__(self, open_table: Any, trigger_dir: Path, java: _JavaBatch) -> None:
        self.open_table, self.trigger_dir, self.java = open_table, trigger_dir, java
        self.on, self.stop, self.armed = threading.Event(), threading.Event(), threading.Event()
        self.lock = threading.Lock()
        self.records: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.forced: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._loop, name="background-compactor", daemon=True)

    def rewrite_hook(self, original: Any) -> Any:
        """``rewrite_group``, plus: in an armed background compaction, after its first rewritten group whose
        files hold a row Java can delete, that delete commits before the compaction goes on to its commit."""

        def rewrite(table: Any, group: Any, files: Any) -> Any:
            outcome = original(table, group, files)
            if threading.current_thread() is self.thread and self.armed.is_set():
                answer = self._trigger([c.path for c in group.files])
                if "error" not in answer:
                    self.armed.clear()
                    self.forced = {**answer, "group": [_norm(c.path) for c in group.files]}
            return outcome

        return rewrite

    def _trigger(self, paths: list[str]) -> dict[str, Any]:
        number = len(list(self.trigger_dir.glob("trigger-*.json")))
        request = self.trigger_dir / f"trigger-{number}.json"
        request.write_text(json.dumps({"files": paths}), encoding="utf-8")
        answer_file = self.trigger_dir / f"triggered-{number}.json"
        _wait_for(answer_file, self.java, timeout=120)
        answer: dict[str, Any] = json.loads(answer_file.read_text(encoding="utf-8"))
        return answer

    def _loop(self) -> None:
        table = self.open_table()
        policy = RetryPolicy.from_properties(table.metadata.properties)
        while not self.stop.is_set():
            if not self.on.wait(0.05):
                continue
            with self.lock:
                if not self.on.is_set():
                    continue
                armed = self.armed.is_set()
                try:
                    table.refresh()
                    record = compact_data(table, OPTIONS, policy=policy).to_json()
                except CommitConflictError as exc:  # every group conflicted: nothing committed
                    record = {"error": str(exc), "snapshotIds": [], "conflicts": [], "groups": []}
                except Exception as exc:
                    self.errors.append(f"background compaction: {type(exc).__name__}: {exc}")
                    return
                record["forced"] = armed and not self.armed.is_set()
                if record["groups"] or "error" in record:
                    self.records.append(record)
            time.sleep(0.2)


def _model(chain: list[dict[str, Any]], report: dict[str, Any]) -> dict[int, Counter[tuple[Any, ...]]]:
    """The rows expected at each snapshot: the Java commits replayed in chain order (module docstring)."""
    triggered = report["triggered"]
    rows: dict[tuple[str, int, int], int] = {}
    expected: dict[int, Counter[tuple[Any, ...]]] = {}
    for snapshot in chain:
        summary = snapshot["summary"]
        writer = summary.get(TAG + "writer")
        if writer is not None:
            seq, op = int(summary[TAG + "seq"]), summary[TAG + "op"]
            if op == "insert":
                for k in range(ROWS_PER_INSERT):
                    assert (writer, seq, k) not in rows
                    rows[(writer, seq, k)] = 0
            else:
                target_seq, target_k = (int(x) for x in summary[TAG + "target"].split(":"))
                owner = triggered[seq]["writer"] if writer == "trigger" else writer
                key = (owner, target_seq, target_k)
                assert key in rows, f"{snapshot['snapshot_id']}: {op} of a row that is not live: {key}"
                if op == "delete":
                    del rows[key]
                else:
                    rows[key] = 1000 + seq
        expected[snapshot["snapshot_id"]] = Counter((w, s, k, v) for (w, s, k), v in rows.items())
    return expected


def _row_level_commits(chain: list[dict[str, Any]], report: dict[str, Any]) -> list[tuple[int, str]]:
    """(sequence number, data file its position delete names) of every Java delete and update."""
    files = {
        (w, op["seq"]): op["file"] for w, r in report["writers"].items() for op in r["ops"] if op["file"]
    }
    files |= {("trigger", n): t["file"] for n, t in enumerate(report["triggered"])}
    commits = []
    for snapshot in chain:
        summary = snapshot["summary"]
        if summary.get(TAG + "op") in ("delete", "update"):
            key = (summary[TAG + "writer"], int(summary[TAG + "seq"]))
            commits.append((snapshot["sequence_number"], _norm(files[key])))
    return commits


def _data_files(files: list[dict[str, Any]]) -> set[str]:
    return {_norm(f["file_path"]) for f in files if f["content"] == 0}


def _check_compaction(
    record: dict[str, Any], chain: dict[int, dict[str, Any]], java_files: dict[str, Any], deletes: list[Any]
) -> int:
    """One compaction against what Java saw (module docstring); returns the groups it left out."""
    start_seq = record["sequenceNumber"]
    groups = [{_norm(p) for p in g["paths"]} for g in record["groups"]]
    assert len(record["snapshotIds"]) == 1, record
    replace = chain[record["snapshotIds"][0]]
    assert replace["operation"] == "replace" and TAG + "writer" not in replace["summary"]
    parent = _data_files(java_files[str(replace["parent_id"])])
    removed = parent - _data_files(java_files[str(replace["snapshot_id"])])
    committed = [g for g in groups if g <= removed]
    left_out = [g for g in groups if not g & removed]
    assert len(committed) + len(left_out) == len(groups), "a group was committed in part"
    assert set().union(*committed) == removed, "the replace removed files of no committed group"
    assert record["groupsCommitted"] == len(committed) and len(record["conflicts"]) == len(left_out), record
    window = [path for seq, path in deletes if start_seq < seq < replace["sequence_number"]]
    for group in committed:
        assert not group & set(window), f"committed over a concurrent delete: {group & set(window)}"
    for group in left_out:
        assert group & {path for seq, path in deletes if seq > start_seq}, f"a spurious conflict: {group}"
    return len(left_out)


def _java_commands(identifier: str, tmp_path: Path) -> list[list[str]]:
    """Create the table, run the writers, wait for ``done``, then Java's views (one Spark session)."""
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in TABLE_PROPERTIES.items())
    barrier_dir, trigger_dir = tmp_path / "barrier", tmp_path / "trigger"
    ready, go, done = tmp_path / "ready", tmp_path / "go", tmp_path / "done"
    return [
        ["sql", "--statement", f"CREATE NAMESPACE IF NOT EXISTS {JDBC_CATALOG}.{NAMESPACE}",
         "--statement", f"CREATE TABLE {identifier} (writer STRING, seq BIGINT, k BIGINT, v BIGINT) USING iceberg"
                        f" PARTITIONED BY (writer) TBLPROPERTIES ({properties})"],
        ["row-loop", "--table", identifier, "--count", str(COMMITS), "--rows-per-commit", str(ROWS_PER_INSERT),
         "--ready-file", str(ready), "--go-file", str(go), "--pause-every", str(PER_ROUND),
         "--pause-dir", str(barrier_dir), "--trigger-dir", str(trigger_dir),
         *(arg for writer in WRITERS for arg in ("--writer", writer))],
        ["wait-file", "--path", str(done)],
        ["snapshots", "--table", identifier],
        ["files", "--table", identifier, "--all", "--source", "java"],
    ]  # fmt: skip


def test_data_compaction_against_java_row_level_writers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse, catalog_db = tmp_path / "warehouse", tmp_path / "catalog.db"
    barrier_dir, trigger_dir = tmp_path / "barrier", tmp_path / "trigger"
    barrier_dir.mkdir()
    trigger_dir.mkdir()
    identifier = f"{JDBC_CATALOG}.{NAMESPACE}.{TABLE}"
    ready, go, done = tmp_path / "ready", tmp_path / "go", tmp_path / "done"
    commands = _java_commands(identifier, tmp_path)
    java = _JavaBatch(commands, warehouse, catalog_db)
    catalog_properties = {"type": "sql", "uri": f"sqlite:///{catalog_db}", "warehouse": warehouse.as_uri()}
    catalog_args = [
        "--catalog", JDBC_CATALOG,
        *(arg for k, v in catalog_properties.items() for arg in ("--catalog-property", f"{k}={v}")),
    ]  # fmt: skip

    def open_ours() -> Any:
        return open_catalog_table(
            f"{NAMESPACE}.{TABLE}", catalog_name=JDBC_CATALOG, catalog_properties=catalog_properties
        )

    rounds, compactor = _Rounds(barrier_dir, java), _Compactor(open_ours, trigger_dir, java)
    monkeypatch.setattr(
        data_compaction_run, "rewrite_group", compactor.rewrite_hook(data_compaction_run.rewrite_group)
    )
    barriers: dict[int, dict[str, Any]] = {}
    try:
        _wait_for(ready, java)
        go.touch()
        started = time.monotonic()
        compactor.thread.start()
        for round_ in BARRIERS:
            rounds.wait_all(round_)
            with compactor.lock:  # the background compactor stands still too
                compactor.on.clear()
                code, out, err = run("compact-data", f"{NAMESPACE}.{TABLE}", *catalog_args, "--min-input-files",
                                     "2", "--json")  # fmt: skip
                assert code == 0, err
                barriers[round_] = json.loads(out)
                if round_ + 1 >= BACKGROUND_FROM_ROUND:
                    compactor.on.set()
                if round_ + 1 == FORCED_ROUND:
                    compactor.armed.set()
            rounds.resume(round_)
        while java.alive() and not all((barrier_dir / f"finished-{w}").exists() for w in WRITERS):
            assert not list(barrier_dir.glob("failed-*")), [
                p.read_text() for p in barrier_dir.glob("failed-*")
            ]
            time.sleep(0.05)
        compactor.stop.set()
        compactor.thread.join(timeout=300)
        seconds = time.monotonic() - started
        (trigger_dir / "stop").touch()
        done.touch()
        results = java.result(timeout=600)
        # Rows (a Spark job per snapshot) where our commits are: each replace snapshot and its parent, the head.
        ours = [s for s in results[3]["snapshots"] if s["operation"] == "replace"]
        wanted = sorted(
            {results[3]["current_snapshot_id"]}
            | {x for s in ours for x in (s["snapshot_id"], s["parent_id"])}
        )
        rows = run_oracle_batch(
            [["rows", "--table", identifier, "--snapshot", str(sid)] for sid in wanted],
            warehouse=warehouse, catalog_db=catalog_db,
        )  # fmt: skip
        results.append({"snapshots": dict(zip([str(sid) for sid in wanted], rows, strict=True))})
        print(f"java views: {time.monotonic() - started - seconds:.1f} s for {len(wanted)} snapshots' rows")
    finally:
        compactor.stop.set()
        rounds.release_all()
        (trigger_dir / "stop").touch()
        done.touch()
    _verify(results, barriers, compactor, seconds)


def _verify(
    results: list[Any], barriers: dict[int, dict[str, Any]], compactor: _Compactor, seconds: float
) -> None:
    _, report, _, snapshots, java_files, java_rows = results
    conflicts = sum(len(r.get("conflicts", [])) + ("error" in r) for r in compactor.records)
    print(
        f"{seconds:.1f} s; java: { {w: (r['commits'], r['revalidated'], r['exhausted']) for w, r in report['writers'].items()} }; "
        f"background compactions: {len(compactor.records)}, conflicts {conflicts}; triggered: {report['triggered']}"
    )
    assert compactor.errors == []
    for writer in WRITERS:
        assert report["writers"][writer]["error"] is None, report["writers"][writer]
        assert report["writers"][writer]["commits"] == COMMITS

    # One chain; every Java commit exactly one snapshot; the rest are our replace snapshots.
    chain = sorted(snapshots["snapshots"], key=lambda s: s["sequence_number"])
    assert [s["sequence_number"] for s in chain] == list(range(1, len(chain) + 1))
    for parent, child in itertools.pairwise(chain):
        assert child["parent_id"] == parent["snapshot_id"], child
    assert snapshots["current_snapshot_id"] == chain[-1]["snapshot_id"]
    tagged = [
        (s["summary"][TAG + "writer"], int(s["summary"][TAG + "seq"]))
        for s in chain
        if TAG + "writer" in s["summary"]
    ]
    expected_commits = [(w, s) for w in WRITERS for s in range(COMMITS)]
    expected_commits += [("trigger", n) for n in range(len(report["triggered"]))]
    assert Counter(tagged) == Counter(expected_commits)
    ours = [s for s in chain if TAG + "writer" not in s["summary"]]
    assert all(s["operation"] == "replace" for s in ours)

    _check_files_and_rows(chain, report, java_files["snapshots"], java_rows["snapshots"])
    _check_barriers(chain, barriers, java_files["snapshots"])
    _check_compactions(chain, report, barriers, compactor, java_files["snapshots"])


def _check_files_and_rows(
    chain: list[dict[str, Any]], report: dict[str, Any], files: dict[str, Any], java_rows: dict[str, Any]
) -> None:
    # Java's files at EVERY snapshot: each Java commit adds exactly what it wrote (an insert one data file of
    # its rows, a delete one position-delete file, an update both), each of ours only swaps data files.
    previous: Counter[tuple[Any, ...]] = Counter()
    for snapshot in chain:
        now = Counter(
            (f["content"], _norm(f["file_path"]), f["record_count"])
            for f in files[str(snapshot["snapshot_id"])]
        )
        added, removed = now - previous, previous - now
        op = snapshot["summary"].get(TAG + "op")
        shape = sorted((content, records) for content, _, records in added.elements())
        if op is None:
            assert all(c == 0 for c, *_ in [*added, *removed]) and removed, snapshot["snapshot_id"]
        else:
            assert (
                not removed
                and shape
                == {"insert": [(0, ROWS_PER_INSERT)], "delete": [(1, 1)], "update": [(0, 1), (1, 1)]}[op]
            )
        previous = now

    # Java's rows where we committed (each replace snapshot and its parent) and at the head are the model's:
    # every replace keeps its parent's rows exactly.
    model = _model(chain, report)
    for sid, rows in java_rows.items():
        assert Counter((r["writer"], r["seq"], r["k"], r["v"]) for r in rows) == model[int(sid)], sid
    head = model[chain[-1]["snapshot_id"]]
    deleted = {(w, s - 2, 0) for w in WRITERS for s in range(COMMITS) if s % 5 == 3}
    deleted |= {(t["writer"], t["seq"], t["k"]) for t in report["triggered"] if "error" not in t}
    updated = {(w, s - 4, 1): 1000 + s for w in WRITERS for s in range(COMMITS) if s % 5 == 4}
    inserted = {
        (w, s, k) for w in WRITERS for s in range(COMMITS) if s % 5 < 3 for k in range(ROWS_PER_INSERT)
    }
    assert head == Counter((*key, updated.get(key, 0)) for key in inserted - deleted)


def _check_barriers(
    chain: list[dict[str, Any]], barriers: dict[int, dict[str, Any]], files: dict[str, Any]
) -> None:
    # The barrier compactions: between the rounds, nothing conflicting; after each, one file per partition. (A
    # background compaction that ran after the round's last commits may have left it nothing to do.)
    position = {s["snapshot_id"]: i for i, s in enumerate(chain)}
    for round_, document in barriers.items():
        assert document["conflicts"] == [] and document["groupsCommitted"] == len(document["groups"])
        after = document["snapshotId"] or document["snapshotBefore"]
        assert (document["snapshotId"] is None) == (document["groups"] == []), document
        for s in chain:
            if s["summary"].get(TAG + "writer") in WRITERS:
                ordered = position[s["snapshot_id"]] <= position[after]
                assert (int(s["summary"][TAG + "seq"]) // PER_ROUND < round_) == ordered, (round_, s)
        live = [f for f in files[str(after)] if f["content"] == 0]
        assert Counter(f["partition"]["writer"] for f in live) == dict.fromkeys(WRITERS, 1), round_


def _check_compactions(
    chain: list[dict[str, Any]],
    report: dict[str, Any],
    barriers: dict[int, dict[str, Any]],
    compactor: _Compactor,
    files: dict[str, Any],
) -> None:
    ours = [s for s in chain if TAG + "writer" not in s["summary"]]
    # Every compaction that committed: exactly its committed groups, none over a concurrent delete, and every
    # group left out counted; the forced conflict among them.
    by_id = {s["snapshot_id"]: s for s in chain}
    deletes = _row_level_commits(chain, report)
    committed = [r for r in [*barriers.values(), *compactor.records] if r.get("snapshotIds")]
    left_out = sum(_check_compaction(r, by_id, files, deletes) for r in committed)
    assert sorted(r["snapshotIds"][0] for r in committed) == sorted(s["snapshot_id"] for s in ours)
    assert sum(r["filesRewritten"] for r in committed) > 4 * len(WRITERS)
    assert compactor.forced, "the forced conflict did not happen"
    # The forced one: the compaction that was held names a file of the group Java deleted from, and did not
    # commit that group (checked above with every other: no group committed over a concurrent delete).
    forced = [r for r in compactor.records if r["forced"]]
    assert len(forced) == 1, [r.get("conflicts") for r in compactor.records]
    assert {_norm(p) for p in _named_files(forced[0])} & set(compactor.forced["group"]), forced[0]
    assert left_out + sum("error" in r for r in compactor.records) >= 1


def _named_files(record: dict[str, Any]) -> list[str]:
    """The files a compaction's conflicts (or its every-group-conflicts error) name."""
    text = " ".join(record.get("conflicts", [])) + " " + record.get("error", "")
    return re.findall(r"[^\s();]+\.parquet", text)
