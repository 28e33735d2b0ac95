"""Java row-level writers for the Iceberg oracle (``iceberg_oracle.py row-loop``): JVM threads that insert, delete
and update rows of one table, committing exactly as Spark's merge-on-read DELETE and UPDATE do.

Loaded by ``iceberg_oracle.py`` (same directory, same ``.venv-iceberg`` interpreter); it uses the oracle's Spark
session ``o`` only. The table needs columns ``writer`` (string), ``seq``, ``k`` and ``v`` (integers), and should
be partitioned by ``writer`` (each writer then only touches its own partition's files).

**The schedule** of writer W, commit ``s`` (0-based), ``K`` rows per insert (at least 3):

* ``s % 5 in (0, 1, 2)``: insert rows (W, s, k, v=0) for k < K: a fast append;
* ``s % 5 == 3``: delete row (W, s - 2, 0);
* ``s % 5 == 4``: update row (W, s - 4, 1) to v = 1000 + s.

Rows with k = K - 1 are never in the schedule: the triggered deletes (below) take those. Every commit sets the
snapshot summary properties ``lakeformat.writer`` = W, ``lakeformat.seq`` = s, ``lakeformat.op`` =
insert|delete|update and (row-level ones) ``lakeformat.target`` = "<seq>:<k>", so that the caller can attribute
each snapshot.

**A delete** is what Spark's ``SparkPositionDeltaWrite`` commits for ``DELETE ... WHERE`` under the default
serializable isolation, with file-scoped position deletes:

1. load the table; its head H; locate the row at H with ``SELECT _file, _pos ... VERSION AS OF H``;
2. write a position-delete file holding (``_file``, ``_pos``) in the row's partition;
3. ``newRowDelta().addDeletes(f).validateFromSnapshot(H).validateDataFilesExist([_file])
   .validateDeletedFiles().conflictDetectionFilter(writer = W).validateNoConflictingDataFiles()
   .validateNoConflictingDeleteFiles().commit()``.

A ``ValidationException`` (a concurrent commit, e.g. a compaction, removed ``_file`` since H) means nothing
landed: go back to 1 (counted in ``revalidated``); a ``CommitFailedException`` after Java's own retries too
(``exhausted``). **An update** is the same row delta that also adds a data file with the new row.

**Triggered deletes** (``--trigger-dir D``): one more thread waits for ``D/trigger-N.json`` (``{"files": [paths]}``),
deletes one live row with k = K - 1 of the first of those files that holds one (as above, tagged writer
``trigger``, seq N, op delete), then writes ``D/triggered-N.json`` (``{"writer", "seq", "k", "file"}`` of the
row, or ``{"error"}``); it stops once ``D/stop`` exists. A caller holding its own commit between rewrite and
commit uses it to make a concurrent delete land on a file it is rewriting, deterministically.

With ``--pause-dir D`` each writer also writes ``D/finished-W`` when it is done (``D/failed-W`` with the error when
it failed), so that the caller can stop what it runs beside the writers before the trigger thread ends.

The result: ``{"writers": {W: {"commits", "revalidated", "exhausted", "error", "seconds", "ops": [{"seq", "op",
"target", "file"}]}}, "triggered": [...]}`` (``file``: the data file a row-level commit's delete names).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

INSERT, DELETE, UPDATE = "insert", "delete", "update"
TRIGGER_WRITER = "trigger"


def scheduled(seq: int) -> tuple[str, tuple[int, int] | None]:
    """The operation of commit ``seq`` and the (seq, k) of the row it targets (module docstring)."""
    phase = seq % 5
    if phase == 3:
        return DELETE, (seq - 2, 0)
    if phase == 4:
        return UPDATE, (seq - 4, 1)
    return INSERT, None


def _exception_class(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)
    return "" if java is None else str(java.getClass().getName())


class _Writers:
    """The shared state of one row-loop: the session, the prepared records, the report."""

    def __init__(self, o: Any, identifier: str, writers: list[str], count: int, rows_per_commit: int) -> None:
        self.o, self.identifier, self.count, self.k = o, identifier, count, rows_per_commit
        self.iceberg = o.jvm.org.apache.iceberg
        table = o.load(identifier)
        self.schema, self.spec = table.schema(), table.spec()
        names = [str(f.name()) for f in self.schema.columns()]
        for required in ("writer", "seq", "k", "v"):
            if required not in names:
                raise ValueError(f"row-loop needs a column {required!r} ({identifier} has {names})")
        rows: list[dict[str, Any]] = []
        for writer in writers:
            for seq in range(count):
                op, target = scheduled(seq)
                if op == INSERT:
                    rows += [{"writer": writer, "seq": seq, "k": k, "v": 0} for k in range(rows_per_commit)]
                elif op == UPDATE:
                    assert target is not None
                    rows.append({"writer": writer, "seq": target[0], "k": target[1], "v": 1000 + seq})
        for writer in [*writers, TRIGGER_WRITER]:  # one row per writer: its partition key
            rows.append({"writer": writer, "seq": -1, "k": -1, "v": -1})
        java_rows = o._spark_rows(identifier, names, rows)
        converter = self.iceberg.spark.SparkValueConverter
        self.records: dict[tuple[str, int, int, int], Any] = {}
        for index, row in enumerate(rows):
            key = (row["writer"], row["seq"], row["k"], row["v"])
            self.records[key] = converter.convert(self.schema, java_rows.get(index))
        self.report: dict[str, dict[str, Any]] = {
            w: {"commits": 0, "revalidated": 0, "exhausted": 0, "error": None, "ops": []} for w in writers
        }
        self.lock = threading.Lock()

    def partition_key(self, writer: str) -> Any:
        wrapper = self.iceberg.data.InternalRecordWrapper(self.schema.asStruct())
        key = self.iceberg.PartitionKey(self.spec, self.schema)
        key.partition(wrapper.wrap(self.records[(writer, -1, -1, -1)]))
        return key

    def _output(self, table: Any, key: Any, name: str) -> Any:
        location = table.locationProvider().newDataLocation(self.spec, key, name)
        return self.iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
            table.io().newOutputFile(location)
        )

    def data_file(self, table: Any, writer: str, records: list[Any], name: str) -> Any:
        factory = self.iceberg.data.GenericAppenderFactory(self.schema, self.spec)
        key = self.partition_key(writer)
        output = self._output(table, key, name)
        data_writer = factory.newDataWriter(output, self.iceberg.FileFormat.PARQUET, key)
        try:
            for record in records:
                data_writer.write(record)
        finally:
            data_writer.close()
        return data_writer.toDataFile()

    def position_delete(self, table: Any, writer: str, path: str, position: int, name: str) -> Any:
        factory = self.iceberg.data.GenericAppenderFactory(self.schema, self.spec)
        key = self.partition_key(writer)
        output = self._output(table, key, name)
        delete_writer = factory.newPosDeleteWriter(output, self.iceberg.FileFormat.PARQUET, key)
        try:
            delete_writer.write(self.iceberg.deletes.PositionDelete.create().set(path, position, None))
        finally:
            delete_writer.close()
        return delete_writer.toDeleteFile()

    def locate(self, head: int, writer: str, where: str) -> list[tuple[str, int, int, int]]:
        """(_file, _pos, seq, k) of the live rows of ``writer`` matching ``where`` at snapshot ``head``."""
        quoted = self.o.quoted(self.identifier)
        rows = self.o.spark.sql(
            f"SELECT _file, _pos, seq, k FROM {quoted} VERSION AS OF {head} "
            f"WHERE writer = '{writer}' AND {where}"
        ).collect()
        return [(str(r["_file"]), int(r["_pos"]), int(r["seq"]), int(r["k"])) for r in rows]

    def insert(self, writer: str, seq: int) -> None:
        records = [self.records[(writer, seq, k, 0)] for k in range(self.k)]
        table = self.o.load(self.identifier)
        data = self.data_file(
            table, writer, records, f"java-rows-{writer}-{seq:05d}-{time.time_ns()}.parquet"
        )
        while True:
            operation = self._tagged(table.newFastAppend(), writer, seq, INSERT, None).appendFile(data)
            try:
                operation.commit()
                return
            except Exception as exc:
                if not _exception_class(exc).endswith("CommitFailedException"):
                    raise
                self._count(writer, "exhausted")
                table.refresh()

    def row_level(self, writer: str, seq: int, op: str, target: tuple[int, int], tag_writer: str) -> str:
        """Delete or update one row (module docstring); returns the data file its delete names."""
        iceberg = self.iceberg
        while True:
            table = self.o.load(self.identifier)
            head = int(table.currentSnapshot().snapshotId())
            found = self.locate(head, writer, f"seq = {target[0]} AND k = {target[1]}")
            if len(found) != 1:
                raise RuntimeError(f"{writer} {op} {target}: {len(found)} live rows at snapshot {head}")
            path, position = found[0][0], found[0][1]
            stamp = f"{tag_writer}-{seq:05d}-{time.time_ns()}"
            delta = table.newRowDelta()
            delta = delta.addDeletes(
                self.position_delete(table, writer, path, position, f"java-del-{stamp}.parquet")
            )
            if op == UPDATE:
                record = next(
                    r for key, r in self.records.items() if key[:3] == (writer, *target) and key[3] > 0
                )
                delta = delta.addRows(self.data_file(table, writer, [record], f"java-upd-{stamp}.parquet"))
            delta = (
                self._tagged(delta, tag_writer, seq, op, target)
                .validateFromSnapshot(head)
                .validateDataFilesExist([path])
                .validateDeletedFiles()
                .conflictDetectionFilter(iceberg.expressions.Expressions.equal("writer", writer))
                .validateNoConflictingDataFiles()
                .validateNoConflictingDeleteFiles()
            )
            try:
                delta.commit()
                return path
            except Exception as exc:
                name = _exception_class(exc)
                if name.endswith("ValidationException"):
                    self._count(tag_writer, "revalidated")
                elif name.endswith("CommitFailedException"):
                    self._count(tag_writer, "exhausted")
                else:
                    raise

    def _tagged(self, operation: Any, writer: str, seq: int, op: str, target: tuple[int, int] | None) -> Any:
        operation = operation.set("lakeformat.writer", writer).set("lakeformat.seq", str(seq))
        operation = operation.set("lakeformat.op", op)
        return operation if target is None else operation.set("lakeformat.target", f"{target[0]}:{target[1]}")

    def _count(self, writer: str, key: str) -> None:
        with self.lock:
            if writer in self.report:
                self.report[writer][key] += 1

    def run(self, writer: str, pause_every: int, pause_dir: Path | None) -> None:
        started = time.monotonic()
        report = self.report[writer]
        try:
            for seq in range(self.count):
                op, target = scheduled(seq)
                if op == INSERT:
                    self.insert(writer, seq)
                    report["ops"].append({"seq": seq, "op": op, "target": None, "file": None})
                else:
                    assert target is not None
                    path = self.row_level(writer, seq, op, target, writer)
                    report["ops"].append({"seq": seq, "op": op, "target": list(target), "file": path})
                report["commits"] += 1
                if pause_every and (seq + 1) % pause_every == 0 and seq + 1 < self.count:
                    assert pause_dir is not None
                    _pause(pause_dir, writer, (seq + 1) // pause_every)
        except Exception as exc:  # reported, not raised: the other writers keep going
            report["error"] = f"{type(exc).__name__}: {exc}"[:4000]
            if pause_dir is not None:  # a caller waiting at a barrier must not wait for this writer
                (pause_dir / f"failed-{writer}").write_text(report["error"], encoding="utf-8")
        report["seconds"] = round(time.monotonic() - started, 3)
        if pause_dir is not None:  # the caller may stop what it runs beside the writers
            (pause_dir / f"finished-{writer}").write_text("finished", encoding="utf-8")

    def triggered(self, directory: Path, writers: list[str]) -> list[dict[str, Any]]:
        """The trigger thread (module docstring): serve D/trigger-N.json until D/stop exists."""
        done: list[dict[str, Any]] = []
        number = 0
        while True:
            request = directory / f"trigger-{number}.json"
            if not request.exists():
                if (directory / "stop").exists():
                    return done
                time.sleep(0.01)
                continue
            try:
                answer = self._trigger(number, json.loads(request.read_text(encoding="utf-8")), writers)
            except Exception as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}"[:4000]}
            done.append(answer)
            (directory / f"triggered-{number}.json").write_text(json.dumps(answer), encoding="utf-8")
            number += 1

    def _trigger(self, number: int, request: dict[str, Any], writers: list[str]) -> dict[str, Any]:
        table = self.o.load(self.identifier)
        head = int(table.currentSnapshot().snapshotId())
        wanted = set(request["files"])
        for writer in writers:
            for path, _position, seq, k in self.locate(head, writer, f"k = {self.k - 1}"):
                if path in wanted:
                    file = self.row_level(writer, number, DELETE, (seq, k), TRIGGER_WRITER)
                    return {"writer": writer, "seq": seq, "k": k, "file": file}
        return {"error": f"no live row with k = {self.k - 1} in {sorted(wanted)} at snapshot {head}"}


def _pause(pause_dir: Path, writer: str, round_: int) -> None:
    (pause_dir / f"paused-{writer}-{round_}").write_text("paused", encoding="utf-8")
    resume, deadline = pause_dir / f"resume-{round_}", time.monotonic() + 300
    while not resume.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{resume} did not appear within 300 s")
        time.sleep(0.005)


def _wait_go(ready_file: Path | None, go_file: Path | None) -> None:
    if ready_file is not None:
        ready_file.write_text("ready", encoding="utf-8")
    if go_file is None:
        return
    deadline = time.monotonic() + 300
    while not go_file.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{go_file} did not appear within 300 s")
        time.sleep(0.01)


def row_loop(
    o: Any, identifier: str, writers: list[str], count: int, options: dict[str, Any]
) -> dict[str, Any]:
    """Run the writers (and the trigger thread) of the module docstring to the end; return the report.

    ``options``: rows_per_commit, ready_file, go_file, pause_every, pause_dir, trigger_dir (as ``append-loop``'s,
    plus the trigger directory)."""
    rows_per_commit = int(options.get("rows_per_commit") or 3)
    if rows_per_commit < 3:
        raise ValueError("row-loop needs --rows-per-commit >= 3 (k = K-1 is left to the triggered deletes)")
    pause_every, pause_dir = int(options.get("pause_every") or 0), options.get("pause_dir")
    if pause_every and pause_dir is None:
        raise ValueError("row-loop: --pause-every needs --pause-dir")
    state = _Writers(o, identifier, writers, count, rows_per_commit)
    _wait_go(options.get("ready_file"), options.get("go_file"))
    threads = [
        threading.Thread(target=state.run, args=(w, pause_every, pause_dir), name=f"java-rows-{w}")
        for w in writers
    ]
    trigger_dir: Path | None = options.get("trigger_dir")
    triggered: list[dict[str, Any]] = []
    if trigger_dir is not None:
        trigger = threading.Thread(
            target=lambda: triggered.extend(state.triggered(trigger_dir, writers)), name="java-rows-trigger"
        )
        threads.append(trigger)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"writers": state.report, "triggered": triggered}
