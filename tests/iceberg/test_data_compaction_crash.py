"""An Iceberg data compaction killed (SIGKILL) at every step converges on re-run; what it left is an orphan.

``lakeformat compact-data`` runs in a process of its own that dies by ``SIGKILL`` at one of these fault points,
so no ``finally``, no clean-up, no buffered write runs:

========================  =======================================================================================
``planned``               the plan is made, nothing written
``file-started``          the first output file is open, a row group written to it, not closed (a torn file)
``file-written:N``        the N-th output file is closed (one per partition here: 1 and 2)
``staged``                the manifests and the manifest list are written, the metadata commit not started
``metadata-written``      the new metadata file is written, the catalog not swapped (SQL catalog); in the Hadoop
                          layout the exclusive create of ``v<N+1>.metadata.json`` IS the commit, and the process
                          dies before ``version-hint.text`` is rewritten
``committed``             the commit returned, nothing after it ran (the result never printed)
========================  =======================================================================================

The fault points are installed by wrapping, in the dying process only, the function that ends each step
(``data_compaction_run.plan_data_compaction`` / ``stage_rewrite`` / ``commit_with_retry``, the rewrite's
``_RollingWriter._flush`` / ``close``, pyiceberg's ``MetastoreCatalog._write_metadata``, ``HadoopLayoutCatalog.
_write_version_hint``): the compaction code has no fault hooks of its own, and needs none. Each run must die by
SIGKILL (a renamed function or a skipped step fails the test, never passes it silently). The processes are forked
from one zygote that imported everything once, by a dry run of the same command (a new interpreter per crash, or
a child importing the CLI's modules itself, costs seconds each).

For each point, on its own copy of one table (2 partitions x 3 small files, a position delete in one):

* the commit landed exactly when the process died after it (``committed``, and the Hadoop ``metadata-written``);
* a re-run gives what a clean run gives: Java reads the same rows at the head, the same live data and delete
  files per partition (a crash after the commit makes the re-run a no-op);
* what the crashed run wrote is unreferenced, and ``lakeformat remove-orphans --apply`` deletes none of it
  within the orphan window (default 3 days); once every file is 4 days old it deletes exactly those files (none
  when the commit landed), never a live one: every file a snapshot references is still there, Java reads the
  manifests of every snapshot and the rows at the head.

Both a SQL-catalog table (the JDBC catalog Java shares) and a Hadoop-layout table (single writer, so safe).

**A corrupt input file** (a truncated Parquet file, a missing one) in the second group of a run: a typed error
naming that file (``CorruptMetadataError`` / ``MissingMetadataError``, CLI exit 4), nothing committed (no
metadata file added), and the files the first group had written removed.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent

from airflow_lakeformat.core.errors import CorruptMetadataError, MissingMetadataError
from airflow_lakeformat.core.iceberg.catalog.catalog import open_catalog_table, open_path_table
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import compact_data
from airflow_lakeformat.core.iceberg.metadata.live_files import live_files
from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
from airflow_lakeformat.core.iceberg.write import write
from tests.iceberg.helpers import commit_delete_files, data_file, write_parquet
from tests.support.java_iceberg import JDBC_CATALOG, run_oracle, run_oracle_batch
from tests.unit.test_cli import run

# Every step on the Hadoop layout but the first of the two files written (the SQL table takes that one); on the
# SQL catalog, the steps where a catalog differs from the Hadoop layout.
HADOOP_POINTS = ("planned", "file-started", "file-written:2", "staged", "metadata-written", "committed")
SQL_POINTS = ("file-written:1", "metadata-written", "committed")
LANDED = {("hadoop", "metadata-written"), ("hadoop", "committed"), ("sql", "committed")}
NAMESPACE = "jdb"
# the field ids of the spec's position-delete schema (Java reads delete files by field id)
POSITION_DELETE_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": "2147483546"}),
        pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": "2147483545"}),
    ]
)
OLD = 4 * 24 * 3600  # seconds: past the default orphan window of 3 days

ZYGOTE = r"""
import io, json, os, signal, sys, traceback

import pyarrow.parquet  # noqa: F401  (imported once, here, for every forked run)
import pyiceberg.catalog
import pyiceberg.catalog.sql  # noqa: F401
from airflow_lakeformat import cli
from airflow_lakeformat.core.iceberg.catalog.hadoop_catalog import HadoopLayoutCatalog
from airflow_lakeformat.core.iceberg.maintenance import data_compaction_rewrite as rewrite
from airflow_lakeformat.core.iceberg.maintenance import data_compaction_run as run

def install(point, nth):
    hits = [0]
    def hit():
        hits[0] += 1
        if hits[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
    def after(owner, name, static=False):
        original = getattr(owner, name)
        def wrapper(*args, **kwargs):
            result = original(*args, **kwargs)
            hit()
            return result
        setattr(owner, name, staticmethod(wrapper) if static else wrapper)
    if point == "planned":
        after(run, "plan_data_compaction")
    elif point == "file-started":  # a row group written to an open file
        original_flush = rewrite._RollingWriter._flush
        def flushed(self):
            original_flush(self)
            if self._writer is not None:
                hit()
        rewrite._RollingWriter._flush = flushed
    elif point == "file-written":
        original_close = rewrite._RollingWriter.close
        def closed(self):
            count = len(self.written)
            original_close(self)
            if len(self.written) > count:
                hit()
        rewrite._RollingWriter.close = closed
    elif point == "staged":
        after(run, "stage_rewrite")
    elif point == "metadata-written":
        after(pyiceberg.catalog.MetastoreCatalog, "_write_metadata", static=True)
        original = HadoopLayoutCatalog._write_version_hint
        def before_hint(*args):
            hit()
            return original(*args)
        HadoopLayoutCatalog._write_version_hint = staticmethod(before_hint)
    elif point == "committed":
        after(run, "commit_with_retry")
    else:
        raise ValueError(point)

for line in sys.stdin:
    request = json.loads(line)
    if request.get("warm"):  # the same command as a dry run, here: the child finds its modules imported
        cli.main(request["warm"], out=io.StringIO())
    pid = os.fork()
    if pid == 0:
        code = 98
        try:
            with open(request["log"], "w") as log:
                os.dup2(log.fileno(), 1)
                os.dup2(log.fileno(), 2)
                os.environ.update(request.get("env", {}))
                name, _, nth = request["point"].partition(":")
                install(name, int(nth or 1))
                code = cli.main(request["argv"])
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    answer = {"signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
              "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}
    print(json.dumps(answer), flush=True)
"""


class _Zygote:
    """One interpreter with the CLI imported; each request forks a child that runs the CLI with a fault point."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        self.process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def crash(
        self, point: str, argv: list[str], log: Path, env: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Run the CLI with ``argv`` in a child that dies at ``point`` (``name[:nth]``); its exit or signal."""
        assert self.process.stdin is not None and self.process.stdout is not None
        warm = [*argv, "--dry-run"] if argv[0] == "compact-data" else None
        request = {"point": point, "argv": argv, "log": str(log), "env": env or {}, "warm": warm}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer: dict[str, Any] = json.loads(self.process.stdout.readline())
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            self.process.wait(timeout=60)


_ZYGOTES: list[_Zygote] = []


def shared_zygote() -> _Zygote:
    """This pytest process's zygote (its start, 2-10 s of imports, paid once; closed at exit)."""
    if not _ZYGOTES or _ZYGOTES[0].process.poll() is not None:
        _ZYGOTES[:] = [_Zygote()]
        atexit.register(_ZYGOTES[0].close)
    return _ZYGOTES[0]


@pytest.fixture
def zygote() -> _Zygote:
    return shared_zygote()


def _fill(table: IcebergTable, landing: Path) -> None:
    """3 appends of a file per partition (a, b), then a position delete of one row (id 11) of a's second file."""
    schema = table.table.schema().as_arrow()
    for n in range(3):  # one file per partition per commit
        ids = [10 * n + k + (100 if cat == "b" else 0) for cat in ("a", "b") for k in range(3)]
        write.append(table, pa.table({"id": ids, "cat": ["a"] * 3 + ["b"] * 3}, schema=schema))
    head = table.snapshot(ref="main")
    assert head is not None
    a_files = [f.path for f in live_files(table, head) if f.partition == ("a",)]
    second = next(p for p in a_files if 10 in pq.read_table(_local(p)).column("id").to_pylist())
    deletes = write_parquet(  # row id 11: position 1 of the file holding 10, 11, 12
        landing / f"{uuid.uuid4()}-pos.parquet",
        pa.table({"file_path": [second], "pos": [1]}, schema=POSITION_DELETE_SCHEMA),
    )
    commit_delete_files(
        table, [data_file(table.table, deletes, ("a",), content=DataFileContent.POSITION_DELETES)]
    )


def _local(path: str) -> str:
    return "/" + path.removeprefix("file:").lstrip("/")


def _listing(root: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in root.rglob("*") if p.is_file()}


def _live(table: IcebergTable) -> list[tuple[int, Any, int]]:
    head = table.snapshot(ref="main")
    assert head is not None
    return sorted((f.content, f.partition, f.record_count) for f in live_files(table, head))


class _Tables:
    """The warehouse: SQL-catalog tables (created by Java, so that its JDBC catalog knows them) and Hadoop ones."""

    def __init__(self, base: Path, sql_names: list[str]) -> None:
        self.warehouse, self.catalog_db, self.landing = (
            base / "warehouse",
            base / "catalog.db",
            base / "landing",
        )
        self.catalog_properties = {
            "type": "sql", "uri": f"sqlite:///{self.catalog_db}", "warehouse": self.warehouse.as_uri(),
        }  # fmt: skip
        create = ["--statement", f"CREATE NAMESPACE IF NOT EXISTS {JDBC_CATALOG}.{NAMESPACE}"]
        for name in sql_names:
            create += ["--statement", f"CREATE TABLE {JDBC_CATALOG}.{NAMESPACE}.{name} (id BIGINT, cat STRING) "
                       "USING iceberg PARTITIONED BY (cat) TBLPROPERTIES ('format-version' = '2')"]  # fmt: skip
        if sql_names:
            run_oracle("sql", *create, warehouse=self.warehouse, catalog_db=self.catalog_db)

    def make(self, layout: str, name: str) -> tuple[IcebergTable, list[str], Path]:
        """The filled table, the CLI's arguments naming it, its directory."""
        if layout == "sql":
            table = open_catalog_table(
                f"{NAMESPACE}.{name}", catalog_name=JDBC_CATALOG, catalog_properties=self.catalog_properties
            )
            target = [f"{NAMESPACE}.{name}", "--catalog", JDBC_CATALOG]
            target += [
                a for k, v in self.catalog_properties.items() for a in ("--catalog-property", f"{k}={v}")
            ]
            root = self.warehouse / NAMESPACE / name
        else:
            from pyiceberg.partitioning import PartitionField, PartitionSpec
            from pyiceberg.schema import Schema
            from pyiceberg.transforms import IdentityTransform
            from pyiceberg.types import LongType, NestedField, StringType

            root = self.warehouse / "db" / name
            schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "cat", StringType()))
            spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat"))
            HadoopLayoutCatalog().create_table(
                str(root), schema=schema, partition_spec=spec, properties={"format-version": "2"}
            )
            table, target = open_path_table(str(root)), [str(root)]
        _fill(table, self.landing)
        return table, target, root

    def identifier(self, layout: str, name: str) -> str:
        return f"{JDBC_CATALOG}.{NAMESPACE}.{name}" if layout == "sql" else f"hc.db.{name}"


def _cli(*argv: str) -> dict[str, Any]:
    code, out, err = run(*argv, "--json")
    assert code == 0, f"lakeformat {' '.join(argv)}: exit {code}\n{err}"
    document: dict[str, Any] = json.loads(out)
    return document


def _crash_and_converge(
    zygote: _Zygote, tables: _Tables, layout: str, point: str, name: str, clean: list[Any], tmp: Path
) -> None:
    table, target, root = tables.make(layout, name)
    compact = ["compact-data", *target, "--min-input-files", "2"]
    before, head_before = _listing(root), table.snapshot(ref="main")
    log = tmp / f"{name}.log"
    answer = zygote.crash(point, [*compact, "--json"], log)
    assert answer["signal"] == 9, (
        f"{layout} {point}: did not die at its fault point {answer}: {log.read_text()}"
    )
    table.refresh()
    landed = table.snapshot(ref="main") != head_before
    assert landed == ((layout, point.partition(":")[0]) in LANDED), (layout, point)
    crashed = set(_listing(root)) - set(before)
    assert bool(crashed) == (point != "planned"), f"{layout} {point}: {crashed}"

    rerun = _cli(*compact)
    assert (rerun["snapshotId"] is None) == landed, rerun  # after a landed commit, nothing is left to do
    table.refresh()
    assert _live(table) == clean, f"{layout} {point}: the re-run differs from a clean run"

    # Within the orphan window nothing goes; once all is old, exactly what the crashed run left.
    on_disk = _listing(root)
    _cli("remove-orphans", *target, "--apply")
    assert set(_listing(root)) == set(on_disk), f"{layout} {point}: deleted inside the orphan window"
    old = time.time() - OLD
    for path in on_disk:
        os.utime(path, (old, old))
    _cli("remove-orphans", *target, "--apply")
    deleted = set(on_disk) - set(_listing(root))
    assert deleted == (set() if landed else crashed), f"{layout} {point}: {sorted(deleted ^ crashed)}"
    table.refresh()
    referenced = _referenced(table)
    assert referenced <= set(_listing(root)) | {p for p in referenced if not p.startswith(str(root))}


def _referenced(table: IcebergTable) -> set[str]:
    """Every file any snapshot of the table references, as a local path."""
    paths: set[str] = set()
    io = table.table.io
    for snapshot in table.metadata.snapshots:
        paths.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(io):
            paths.add(manifest.manifest_path)
        paths |= {f.path for f in live_files(table, snapshot)}
    return {_local(p) for p in paths}


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.parametrize("layout", ["hadoop", "sql"])
def test_a_killed_compaction_converges_and_leaves_only_orphans(
    zygote: _Zygote, tmp_path: Path, layout: str
) -> None:
    points = HADOOP_POINTS if layout == "hadoop" else SQL_POINTS
    names = ["clean", *(f"crash_{n}" for n in range(len(points)))]
    tables = _Tables(tmp_path, names if layout == "sql" else [])
    table, target, _ = tables.make(layout, "clean")
    expected = sorted((r["id"], r["cat"]) for r in table.table.scan().to_arrow().to_pylist())
    document = _cli("compact-data", *target, "--min-input-files", "2")
    assert document["filesRewritten"] == 6 and document["rowsPurged"] == 1, document
    table.refresh()
    clean = _live(table)
    assert [(content, partition) for content, partition, _ in clean] == [
        (0, ("a",)),
        (0, ("b",)),
        (1, ("a",)),
    ]
    for number, point in enumerate(points):
        started = time.monotonic()
        _crash_and_converge(zygote, tables, layout, point, f"crash_{number}", clean, tmp_path)
        print(f"{layout} {point}: {time.monotonic() - started:.1f} s")

    # Java: the same rows at every head; its live files per partition as the clean run's.
    commands = []
    for name in names:
        identifier = tables.identifier(layout, name)
        commands += [
            ["rows", "--table", identifier],
            ["files", "--table", identifier, "--all", "--source", "java"],
        ]
    views = run_oracle_batch(commands, warehouse=tables.warehouse, catalog_db=tables.catalog_db)
    for name, rows, every in zip(names, views[::2], views[1::2], strict=True):
        assert sorted((r["id"], r["cat"]) for r in rows) == expected, name
        files = every["snapshots"][str(every["current_snapshot_id"])]
        assert sorted((f["content"], f["partition"]["cat"], f["record_count"]) for f in files) == [
            (c, p[0], n) for c, p, n in clean
        ], name


@pytest.mark.parametrize("damage", ["truncated", "missing"])
def test_a_corrupt_input_file_fails_typed_naming_it_and_leaves_nothing(tmp_path: Path, damage: str) -> None:
    tables = _Tables(tmp_path, [])
    table, target, root = tables.make("hadoop", "t")
    plan = _cli("compact-data", *target, "--min-input-files", "2", "--dry-run")
    assert len(plan["groups"]) == 2
    victim = _local(plan["groups"][-1]["paths"][1])  # in the group rewritten last: the first one is written
    if damage == "truncated":
        data = Path(victim).read_bytes()
        Path(victim).write_bytes(data[: len(data) // 2])
    else:
        Path(victim).unlink()
    before = _listing(root)
    head = table.snapshot(ref="main")

    code, out, err = run("compact-data", *target, "--min-input-files", "2", "--json")
    assert code == 4, (code, out, err)
    assert victim in err, err
    kind = MissingMetadataError if damage == "missing" else CorruptMetadataError
    with pytest.raises(kind) as caught:
        compact_data(open_path_table(str(root)), {"min-input-files": "2"})
    assert victim in str(caught.value)
    assert _listing(root) == before, "the failed runs left files behind"
    table.refresh()
    assert table.snapshot(ref="main") == head
