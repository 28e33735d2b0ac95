"""Build a benchmark table with pypaimon. Run ONLY by the pypaimon interpreter (.venv-pypaimon).

    python bench/pypaimon_build.py WAREHOUSE DATABASE TABLE --commits 2000 --partitions 50

Creates ``DATABASE.TABLE`` in a filesystem catalog: an append-only table (``bucket = -1``)
partitioned by ``dt STRING``, then ``--commits`` batch commits, each writing
``--rows-per-partition`` rows into every one of ``--partitions`` partitions: one data file per
partition per commit, one manifest per commit. pypaimon 2.1 never merges manifests ("handled by
external maintenance"), so snapshot ``k``'s base manifest list holds the ``k - 1`` manifests of
the commits before it: the table Paimon users end up with when nothing maintains it, and the one
where every snapshot's manifest list grows with the history.

Prints one JSON document: seconds, snapshots, data files written.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings

warnings.filterwarnings("ignore")
logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

import pyarrow as pa  # noqa: E402
from pypaimon import CatalogFactory, Schema  # noqa: E402
from pypaimon.schema.data_types import AtomicType, DataField, PyarrowFieldParser  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("warehouse")
    parser.add_argument("database")
    parser.add_argument("table")
    parser.add_argument("--commits", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--rows-per-partition", type=int, default=2)
    args = parser.parse_args()

    started = time.perf_counter()
    catalog = CatalogFactory.create({"warehouse": args.warehouse})
    catalog.create_database(args.database, True)
    schema = Schema(
        [
            DataField(0, "dt", AtomicType("STRING")),
            DataField(1, "id", AtomicType("BIGINT")),
            DataField(2, "name", AtomicType("STRING")),
            DataField(3, "amount", AtomicType("DOUBLE")),
        ],
        partition_keys=["dt"],
        options={"bucket": "-1", "file.format": "parquet"},
    )
    identifier = f"{args.database}.{args.table}"
    catalog.create_table(identifier, schema, False)
    table = catalog.get_table(identifier)
    arrow_schema = PyarrowFieldParser.from_paimon_schema(table.fields)
    partitions = [f"2025-{1 + i // 28:02d}-{1 + i % 28:02d}" for i in range(args.partitions)]
    next_id = 0
    files = 0
    for commit in range(args.commits):
        rows = []
        for dt in partitions:
            for _ in range(args.rows_per_partition):
                rows.append({"dt": dt, "id": next_id, "name": f"n{next_id % 997}", "amount": next_id / 8})
                next_id += 1
        builder = table.new_batch_write_builder()
        writer = builder.new_write()
        committer = builder.new_commit()
        try:
            writer.write_arrow(pa.Table.from_pylist(rows, schema=arrow_schema))
            messages = writer.prepare_commit()
            files += sum(len(m.new_files) for m in messages)
            committer.commit(messages)
        finally:
            writer.close()
            committer.close()
        if commit % 100 == 99:
            print(f"{commit + 1} commits, {time.perf_counter() - started:.0f} s", file=sys.stderr)
    json.dump(
        {"seconds": time.perf_counter() - started, "commits": args.commits, "data_files": files}, sys.stdout
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
