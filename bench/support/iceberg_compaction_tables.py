"""The Iceberg data-compaction benchmark's tables: built once by Java, cached, restored at the same path per run.

Three shapes (``bench_iceberg_data_compaction.py``), all Hadoop-layout format-v2 tables written by Java Iceberg
1.10.2 through Spark SQL in the oracle (``tests/interop/iceberg_oracle.py``), partitioned by identity on
``category``, with columns ``id bigint, category string, name string, amount double, ts timestamp``:

* ``small``: ``commits`` ``INSERT ... SELECT FROM range(...)`` statements; each Spark task writes one file per
  partition (fanout writer, ``write.distribution-mode = none``), so ``files`` files of ``rows`` rows spread over
  ``partitions`` partitions, as a streaming writer leaves them;
* ``mor``: the same with ``write.delete.mode = merge-on-read`` and ``write.delete.granularity = file``, then
  ``delete_rounds`` SQL ``DELETE`` statements (``id % 13 = 3``, then ``id % 17 = 5``, ...), each touching every
  data file. With file granularity Java 1.10 writes one position-delete file per data file and a later DELETE
  merges the file's earlier deletes into its new one (and removes the old), so the table ends with ``files``
  position-delete files, one per data file, each holding every round's deletes;
* ``big``: one partition of ``files`` files holding about ``gib`` GiB together (one compaction group).

Ids are ``0 .. rows_total - 1``, so the rows expected after any compaction are known without reading the table
(:func:`expected_checksum`: count, sum of ids and a sum of mixed ids, i.e. before-minus-deleted).

Iceberg metadata holds absolute paths, so a table is built at its live path ``<work>/warehouse/db/<name>``,
then copied to ``<work>/pristine/<name>`` (data files hard-linked: nothing rewrites a data file in place;
metadata copied: a Hadoop commit rewrites ``version-hint.text``). :func:`restore` puts the pristine table back
at the live path before each measured run, in about a second even for the 2,000-file table.

Example::

    shape = TableShape("small", files=200, partitions=20, rows=500, commits=10)
    ensure_tables([shape])
    root = restore(shape)          # a fresh live copy, ready to compact
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.support.runs import DEFAULT_WORK_DIR

GENERATOR_VERSION = 1
WORK = DEFAULT_WORK_DIR / "iceberg-data-compaction"
NAMESPACE = "db"
#: the deletes of the merge-on-read table, one SQL DELETE each, in order
DELETE_MODULI = ((13, 3), (17, 5), (19, 7), (23, 11))
MIX = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class TableShape:
    """One benchmark table. ``files``: data files; ``rows``: rows per data file (``big``: derived from ``gib``)."""

    kind: str  # "small" | "mor" | "big"
    files: int
    partitions: int = 20
    rows: int = 2000
    commits: int = 100
    delete_rounds: int = 0
    gib: float = 0.0

    @property
    def name(self) -> str:
        if self.kind == "big":
            return f"big_g{self.gib:g}_f{self.files}".replace(".", "p")
        deletes = f"_d{self.delete_rounds}" if self.kind == "mor" else ""
        return f"{self.kind}_f{self.files}_p{self.partitions}_r{self.rows}_c{self.commits}{deletes}"

    @property
    def rows_per_file(self) -> int:
        # a big file's row is ~40 bytes compressed (64 hex characters of sha2, a double, a timestamp, an id)
        return int(self.gib * 2**30 / self.files / 40) if self.kind == "big" else self.rows

    @property
    def rows_total(self) -> int:
        return self.files * self.rows_per_file

    @property
    def identifier(self) -> str:
        return f"{NAMESPACE}.{self.name}"


def warehouse(work: Path = WORK) -> Path:
    return work / "warehouse"


def live_root(shape: TableShape, work: Path = WORK) -> Path:
    return warehouse(work) / NAMESPACE / shape.name


def pristine_root(shape: TableShape, work: Path = WORK) -> Path:
    return work / "pristine" / shape.name


def _select(shape: TableShape, start: int, end: int, tasks: int) -> str:
    """The generated rows ``start .. end - 1`` on ``tasks`` Spark tasks."""
    if shape.kind == "big":
        category, name = "'c00'", "sha2(cast(id AS string), 256)"
    else:
        category = f"concat('c', lpad(cast(id % {shape.partitions} AS string), 2, '0'))"
        name = "substr(sha2(cast(id AS string), 256), 1, 16)"
    return (
        f"SELECT id, {category} AS category, {name} AS name, CAST(id * 7919 % 100000 AS double) / 100 AS amount,"
        f" timestamp_micros(1704067200000000 + id * 1000) AS ts FROM range({start}, {end}, 1, {tasks})"
    )


def build_commands(shape: TableShape) -> list[list[str]]:
    """The oracle batch commands that build ``shape`` at its live path."""
    table = f"hc.{shape.identifier}"
    properties = {
        "format-version": "2",
        "write.distribution-mode": "none",
        "write.spark.fanout.enabled": "true",
    }
    if shape.kind == "mor":
        properties |= {
            "write.delete.mode": "merge-on-read",
            "write.update.mode": "merge-on-read",
            "write.merge.mode": "merge-on-read",
            "write.delete.granularity": "file",
        }
    listed = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
    create = (
        f"CREATE TABLE {table} (id bigint, category string, name string, amount double, ts timestamp) "
        f"USING iceberg PARTITIONED BY (category) TBLPROPERTIES ({listed})"
    )
    commands = [["sql", "--statement", f"DROP TABLE IF EXISTS {table}"], ["sql", "--statement", create]]
    if shape.kind == "big":
        select = _select(shape, 0, shape.rows_total, shape.files)
        return [*commands, ["sql", "--statement", f"INSERT INTO {table} {select}"]]
    per_file_rows = shape.partitions * shape.rows  # one task writes one file per partition
    tasks = max(1, shape.files // (shape.partitions * shape.commits))
    per_commit = tasks * per_file_rows
    for commit in range(shape.commits):
        select = _select(shape, commit * per_commit, (commit + 1) * per_commit, tasks)
        commands.append(["sql", "--statement", f"INSERT INTO {table} {select}"])
    for modulus, rest in DELETE_MODULI[: shape.delete_rounds]:
        commands.append(["sql", "--statement", f"DELETE FROM {table} WHERE id % {modulus} = {rest}"])
    return commands


def copy_table(source: Path, target: Path) -> None:
    """``source`` at ``target``: data files hard-linked, everything else (metadata) copied."""
    shutil.rmtree(target, ignore_errors=True)
    data = source / "data"

    def link_or_copy(src: str, dst: str) -> None:
        if Path(src).is_relative_to(data):
            os.link(src, dst)
        else:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link_or_copy)


def _facts_path(shape: TableShape, work: Path) -> Path:
    return pristine_root(shape, work).with_suffix(".json")


def cached_facts(shape: TableShape, work: Path = WORK) -> dict[str, Any] | None:
    """The build facts of a cached pristine table (None if absent, stale or built elsewhere)."""
    path = _facts_path(shape, work)
    if not path.exists() or not pristine_root(shape, work).is_dir():
        return None
    facts: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    if facts.get("generator") != GENERATOR_VERSION or facts.get("liveRoot") != str(live_root(shape, work)):
        return None
    return facts


def ensure_tables(shapes: Iterable[TableShape], rebuild: bool = False, work: Path = WORK) -> dict[str, Any]:
    """Build (in one Java session) every shape not cached yet; return each shape's build facts by name."""
    from tests.support.java_iceberg import run_oracle_batch

    shapes = list(shapes)
    missing = [s for s in shapes if rebuild or cached_facts(s, work) is None]
    for shape in missing:
        started = time.perf_counter()
        shutil.rmtree(live_root(shape, work), ignore_errors=True)
        warehouse(work).mkdir(parents=True, exist_ok=True)
        run_oracle_batch(build_commands(shape), warehouse=warehouse(work), timeout=7200)
        seconds = time.perf_counter() - started
        copy_table(live_root(shape, work), pristine_root(shape, work))
        facts = {
            "generator": GENERATOR_VERSION,
            "liveRoot": str(live_root(shape, work)),
            "shape": asdict(shape),
            "rowsTotal": shape.rows_total,
            "buildSeconds": round(seconds, 1),
            "builtBy": "Java Iceberg 1.10.2 (Spark 3.5.7 SQL, local[2]) through tests/interop/iceberg_oracle.py",
            **file_facts(live_root(shape, work)),
        }
        _facts_path(shape, work).write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    return {s.name: cached_facts(s, work) for s in shapes}


def restore(shape: TableShape, work: Path = WORK) -> Path:
    """Put the pristine table back at its live path; returns that path."""
    root = live_root(shape, work)
    copy_table(pristine_root(shape, work), root)
    return root


def drop_live(shape: TableShape, work: Path = WORK) -> None:
    """Remove the live copy (and whatever a run wrote into it); the pristine table stays cached."""
    shutil.rmtree(live_root(shape, work), ignore_errors=True)


def file_facts(root: Path) -> dict[str, Any]:
    """Live data and delete files of the current snapshot: counts and bytes (our reader of the manifests)."""
    import pyarrow.parquet as pq

    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
    from airflow_lakeformat.core.iceberg.metadata.files import files_document

    files = files_document(open_path_table(str(root)))["files"]
    data = [f for f in files if f["content"] == "data"]
    deletes = [f for f in files if f["content"] != "data"]
    return {
        "dataFiles": len(data),
        "dataBytes": sum(f["fileSize"] for f in data),
        # row groups: a compaction that writes one per input batch leaves files that read slower than needed
        "dataRowGroups": sum(pq.ParquetFile(f["path"].removeprefix("file:")).num_row_groups for f in data),
        "deleteFiles": len(deletes),
        "deleteBytes": sum(f["fileSize"] for f in deletes),
        "partitions": len({json.dumps(f.get("partition"), sort_keys=True) for f in data}),
    }


def live_ids(shape: TableShape) -> Iterator[Any]:
    """The ids a correct table holds (all minus the merge-on-read table's deletes), in numpy chunks."""
    import numpy as np

    chunk = 4_000_000
    for start in range(0, shape.rows_total, chunk):
        ids = np.arange(start, min(start + chunk, shape.rows_total), dtype=np.int64)
        if shape.kind == "mor":
            keep = np.ones(len(ids), dtype=bool)
            for modulus, rest in DELETE_MODULI[: shape.delete_rounds]:
                keep &= ids % modulus != rest
            ids = ids[keep]
        yield ids


def checksum(chunks: Iterable[Any]) -> dict[str, int]:
    """Count, sum of ids and sum of mixed ids (``id * golden ratio`` mod 2^64, summed mod 2^64) of id chunks."""
    import numpy as np

    count = total = mixed = 0
    for ids in chunks:
        values = np.asarray(ids, dtype=np.int64)
        count += len(values)
        total += int(values.sum(dtype=np.int64))
        with np.errstate(over="ignore"):
            mixed = (mixed + int((values.astype(np.uint64) * np.uint64(MIX)).sum(dtype=np.uint64))) & MASK64
    return {"count": count, "idSum": total, "idMix": mixed}


def expected_checksum(shape: TableShape) -> dict[str, int]:
    """What the table must hold before and after any compaction (see the module docstring)."""
    return checksum(live_ids(shape))


def table_checksum(root: Path) -> dict[str, int]:
    """The checksum of the table's current rows, read through pyiceberg (position deletes applied)."""
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table

    table = open_path_table(str(root))
    reader = table.table.scan(selected_fields=("id",)).to_arrow_batch_reader()
    return checksum(batch.column(0).to_numpy(zero_copy_only=False) for batch in reader)
