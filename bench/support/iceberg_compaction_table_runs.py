"""The Iceberg data-compaction benchmark's baselines: the raw pyarrow floor and Java's ``rewrite_data_files``.

**Raw floor** (:func:`raw_floor`): what a compaction of the same groups costs without Iceberg. One output file per
partition (every table here compacts to one group per partition): each input data file read whole with
``pyarrow.parquet.read_table``, its position deletes applied as a mask (the partition's position-delete files
read once, their ``(file_path, pos)`` rows grouped by path), and the rows written with a ``pq.ParquetWriter``
configured as pyiceberg's writer is for the table (``_get_parquet_writer_kwargs``: codec, level, page sizes),
one ``write_table`` per input file as ours does. No manifests, no planning, no statistics, no commit.

**Java** (:func:`java_runs`): ``CALL hc.system.rewrite_data_files(table => ..., options => map(...))`` on Spark
``local[2]`` in ONE oracle session (Java Iceberg 1.10.2, Spark 3.5.7) with Java's default JIT and GC back (the
oracle's C1-only, serial-GC settings are for quick test start-ups) and a 2 GiB driver heap: one run on a cold
JVM, then ``warm`` runs, each after this process checked Java's previous result and restored the pristine table
(the session waits on a file between runs, ``wait-file``). Timed inside the JVM (``time-call``): the session
start is excluded and reported apart.

Example::

    figures = raw_floor(root, out_dir)                       # {"seconds", "rows", "bytes", "files"}
    runs = java_runs(shape, {"remove-dangling-deletes": "true"}, warm=1, check=my_check)
"""

from __future__ import annotations

import json
import shutil
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.support.iceberg_compaction_tables import TableShape, restore, warehouse
from bench.support.runs import wait_for_oracle_file

#: the oracle runs Java with C1 only and the serial GC (fast test start-ups); for timing, Java's defaults back
JAVA_DEFAULT_JIT_AND_GC = "-XX:TieredStopAtLevel=4 -XX:-UseSerialGC -XX:+UseG1GC"
JAVA_CONF = {"spark.driver.extraJavaOptions": JAVA_DEFAULT_JIT_AND_GC, "spark.driver.memory": "2g"}


def _local(path: str) -> str:
    return path.removeprefix("file:")


def floor_inputs(root: Path) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, str]]:
    """Data files and position-delete files of the current snapshot by partition, and the table's properties."""
    from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
    from airflow_lakeformat.core.iceberg.metadata.files import files_document

    table = open_path_table(str(root))
    data: dict[str, list[str]] = defaultdict(list)
    deletes: dict[str, list[str]] = defaultdict(list)
    for f in files_document(table)["files"]:
        key = json.dumps(f["partition"], sort_keys=True)
        if f["content"] == "data":
            data[key].append(_local(f["path"]))
        elif f["content"] == "position-deletes":
            deletes[key].append(_local(f["path"]))
        else:
            raise ValueError(f"the raw floor applies position deletes only, not {f['content']}")
    return dict(data), dict(deletes), dict(table.metadata.properties)


def raw_floor(root: Path, out_dir: Path) -> dict[str, Any]:
    """Read every input file and write one Parquet file per partition, position deletes applied (timed).

    The file listing (our manifest reader) is taken before the clock starts: the floor is the data's I/O.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import _get_parquet_writer_kwargs

    data, deletes, properties = floor_inputs(root)
    kwargs = _get_parquet_writer_kwargs(properties)
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    rows = written = 0
    started = time.perf_counter()
    for index, (key, paths) in enumerate(sorted(data.items())):
        positions: dict[str, list[Any]] = defaultdict(list)
        for delete_path in deletes.get(key, ()):
            table = pq.read_table(delete_path)
            for path, chunk in _pairs(table.group_by("file_path").aggregate([("pos", "list")])):
                positions[_local(path)].append(chunk)
        target = out_dir / f"{index:05d}.parquet"
        writer: Any = None
        for path in paths:
            rows_in = pq.read_table(path)
            if path in positions:
                gone = np.concatenate([np.asarray(p, dtype=np.int64) for p in positions[path]])
                keep = np.ones(rows_in.num_rows, dtype=bool)
                keep[gone] = False
                rows_in = rows_in.filter(pa.array(keep))
            if writer is None:
                writer = pq.ParquetWriter(str(target), rows_in.schema, **kwargs)
            writer.write_table(rows_in)
            rows += rows_in.num_rows
        if writer is not None:
            writer.close()
            written += target.stat().st_size
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "rows": rows, "bytes": written, "files": len(data)}


def _pairs(table: Any) -> list[tuple[str, list[int]]]:
    """(file_path, positions) of an aggregated position-delete table."""
    paths, positions = table.column("file_path").to_pylist(), table.column("pos_list").to_pylist()
    return list(zip(paths, positions, strict=True))


def java_runs(
    shape: TableShape,
    options: dict[str, str],
    warm: int,
    check: Callable[[int], dict[str, Any]],
    signal_dir: Path,
) -> dict[str, Any]:
    """Java's procedure on the restored table: one cold run, then ``warm`` runs (see the module docstring).

    ``check(run)`` is called after each run with Java's result on disk (before the next restore) and returns
    that run's facts (row checksum, file counts). Returns {"runs": [{"seconds", "rows", "facts"}, ...],
    "sessionSeconds", "processSeconds"}.
    """
    from tests.support.java_iceberg import start_oracle

    arguments = json.dumps({"options": {"map": options}} if options else {})
    call = [
        "time-call",
        "--procedure",
        "rewrite_data_files",
        "--table",
        shape.identifier,
        "--args",
        arguments,
    ]
    signal_dir.mkdir(parents=True, exist_ok=True)
    signals = [(signal_dir / f"java-waiting-{i}", signal_dir / f"java-restored-{i}") for i in range(warm)]
    for path in (p for pair in signals for p in pair):
        path.unlink(missing_ok=True)
    commands: list[list[str]] = [call]
    for waiting, restored in signals:
        commands += [["wait-file", "--path", str(restored), "--signal", str(waiting)], call]
    restore(shape)
    started = time.perf_counter()
    oracle = start_oracle("batch", warehouse=warehouse(), conf=JAVA_CONF, stdin=json.dumps(commands))
    facts = []
    try:
        for waiting, restored in signals:
            wait_for_oracle_file(waiting, oracle)
            facts.append(check(len(facts)))
            restore(shape)
            restored.touch()
        results = oracle.result(timeout=7200)
    finally:
        oracle.stop()
    process_seconds = time.perf_counter() - started
    facts.append(check(len(facts)))
    calls = [results[0], *results[2::2]]
    return {
        "runs": [
            {"seconds": c["seconds"], "procedureOutput": c["rows"], "facts": f}
            for c, f in zip(calls, facts, strict=True)
        ],
        "sessionSeconds": calls[0]["session_seconds"],
        "processSeconds": round(process_seconds, 3),
    }


def java_reads(shapes: list[TableShape]) -> dict[str, dict[str, int]]:
    """Java's count of rows and sum of ids of each table as it is now (after our last run)."""
    from tests.support.java_iceberg import run_oracle_batch

    commands = [
        ["sql", "--statement", f"SELECT count(*) AS n, sum(id) AS s FROM hc.{shape.identifier}"]
        for shape in shapes
    ]
    results = run_oracle_batch(commands, warehouse=warehouse(), timeout=1800)
    return {
        shape.name: {"count": int(rows[0][0]["n"]), "idSum": int(rows[0][0]["s"])}
        for shape, rows in zip(shapes, results, strict=True)
    }
