"""The ``compact_data`` Spark job on Iceberg tables: executors rewrite the file groups, the driver plans and commits.

Same job as for Paimon tables, with Java's ``rewrite_data_files`` semantics (``docs/iceberg.md``): the shorthands
both formats take (``--partition`` by value, ``--min-file-count`` = ``min-input-files``, ``--target-file-size`` =
``target-file-size-bytes``), and Iceberg's own ``--where PREDICATE``, ``--option KEY=VALUE`` (repeatable, Java's
option names, e.g. ``partial-progress.enabled=true``), ``--strategy binpack|sort`` and ``--sort-order ORDER``,
merged as the CLI and the operator merge them (``compaction_arguments`` of the facade). The run is the in-process one
(:func:`~airflow_lakeformat.core.iceberg.maintenance.data_compaction_run.compact_data`) with its group rewriting
handed to executors:

1. The driver plans (``plan_data_compaction``: the starting snapshot, Java's bin-pack groups) and cuts the groups
   into commits (partial progress: batches). A dry run stops here, before any Spark session starts.
2. Per batch, the driver hands each group to an executor: the table's current metadata file and storage options
   (in the task's closure), the group (its files, deletes, partition, split size, sort keys) and the ``DataFile``
   records of its input and delete files, pickled (pyiceberg's ``DataFile`` pickles with its spec id). The
   executor opens the table read-only from that metadata file and rewrites the group with the core's
   ``rewrite_one`` (read in record batches, deletes applied, Parquet written with pyarrow; a failure removes what
   the group wrote and names an unreadable input file, typed). It returns the new files' ``DataFile`` records and
   row counts, pickled back, or the group's error as a value, so the driver sees every group of the batch.
3. The driver commits the batch through the core: the validated ``replace`` commit, conflicting groups skipped
   and their files discarded. A failed group fails the batch: the driver removes the files its other groups wrote
   and raises the group's error (``MissingMetadataError``/``CorruptMetadataError`` naming the file: exit 4);
   batches committed before it stay.

The result is the in-process ``IcebergDataCompactionResult`` JSON, plus ``"job"`` and ``"mode": "spark"``. Tables
of a catalog are opened by the driver through ``$LAKEFORMAT_ICEBERG_CATALOG`` (``spark/runtime.py``); executors
never need the catalog, only the metadata file it points at.
"""

from __future__ import annotations

import argparse
import importlib
import pickle
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.iceberg.catalog.catalog import open_path_table
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_options import CompactionOptions
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_plan import FileGroup
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_rewrite import RewrittenFiles
from airflow_lakeformat.core.iceberg.maintenance.data_compaction_run import compact_data, rewrite_one
from airflow_lakeformat.core.iceberg.metadata.fileio import storage_options_from_properties
from airflow_lakeformat.core.table_maintenance_iceberg import COMMIT_USER_PROPERTY, compaction_arguments
from airflow_lakeformat.core.table_writes import partition_filters
from airflow_lakeformat.core.units import parse_memory_size
from airflow_lakeformat.spark.runtime import JobContext, executor_storage_options

if TYPE_CHECKING:
    from pyiceberg.manifest import DataFile

    from airflow_lakeformat.core.iceberg.metadata.table import IcebergTable
    from airflow_lakeformat.core.tables import IcebergLakeTable

# A group's error as a value: (module, class name, args, attributes), rebuilt on the driver.
PortableError = tuple[str, str, tuple[Any, ...], dict[str, Any]]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The Iceberg-only flags of the job (Java's ``rewrite_data_files`` arguments)."""
    parser.add_argument("--where", help="Iceberg: only files whose partition may match (\"cat = 'a'\")")
    parser.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="Iceberg: a rewrite_data_files option by Java's name (repeatable), e.g. min-input-files=2",
    )
    parser.add_argument("--strategy", choices=("binpack", "sort"), help="Iceberg: Java's strategy (binpack)")
    parser.add_argument(
        "--sort-order", metavar="ORDER", help="Iceberg: e.g. 'id DESC NULLS LAST, name' (implies sort)"
    )


def option_map(values: Sequence[str] | None) -> dict[str, str] | None:
    """``--option KEY=VALUE`` values as Java's option map (None when there are none).

    Example:
        >>> option_map(["min-input-files=2", "partial-progress.enabled = true"])
        {'min-input-files': '2', 'partial-progress.enabled': 'true'}
    """
    options: dict[str, str] = {}
    for value in values or ():
        key, sep, item = value.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--option {value!r} is not of the form KEY=VALUE")
        options[key.strip()] = item.strip()
    return options or None


# -- errors as values ----------------------------------------------------------------------------


def portable_error(exc: BaseException) -> PortableError:
    """``exc`` as plain data that survives pickling (the core's typed errors take other arguments than ``args``)."""
    state = {}
    for key, value in vars(exc).items():
        try:
            pickle.dumps(value)
        except Exception:
            continue
        state[key] = value
    return type(exc).__module__, type(exc).__qualname__, tuple(str(a) for a in exc.args), state


def rebuilt_error(error: PortableError) -> BaseException:
    """The exception an executor reported: the same class, message and attributes (else a RuntimeError)."""
    module, name, args, state = error
    try:
        cls = getattr(importlib.import_module(module), name)
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            raise TypeError(name)
        exc = cls.__new__(cls, *args)
        exc.args = args
        vars(exc).update(state)
        return exc
    except Exception:
        return RuntimeError(f"{name}: {'; '.join(args)}")


# -- executors -----------------------------------------------------------------------------------


def rewrite_partition(
    metadata_location: str,
    options: dict[str, Any],
    groups: Iterator[tuple[int, FileGroup, dict[str, DataFile]]],
) -> Iterator[tuple[int, RewrittenFiles | None, PortableError | None]]:
    """Executor body: rewrite each group of this task; yield (index, new files, None) or (index, None, error)."""
    table = open_path_table(metadata_location, options)
    for index, group, files in groups:
        try:
            yield index, rewrite_one(table, group, files), None
        except Exception as exc:
            yield index, None, portable_error(exc)


class SparkRewriter:
    """The core's ``GroupRewriter`` on Spark: one Spark job per batch, one task per group (at most four per core;
    ``--parallelism`` sets the number), the results back in the groups' order."""

    def __init__(self, context: JobContext, options: Mapping[str, Any]) -> None:
        self.context = context
        self.options = dict(options)
        self.batches = 0

    def __call__(
        self, table: IcebergTable, groups: Sequence[FileGroup], files: Mapping[str, DataFile]
    ) -> Iterator[RewrittenFiles]:
        payloads = [
            (n, group, {p: files[p] for p in [c.path for c in group.files] + list(group.delete_files)})
            for n, group in enumerate(groups)
        ]
        body = partial(rewrite_partition, table.metadata_location, self.options)
        sc = self.context.spark.sparkContext
        self.batches += 1
        sc.setJobDescription(f"compact_data: batch {self.batches}, {len(groups)} file groups")
        slices = self.context.parallelism(len(payloads), per_core=4)
        rows = sorted(sc.parallelize(payloads, slices).mapPartitions(body).collect(), key=lambda row: row[0])
        failed: PortableError | None = None
        for index, outcome, error in rows:
            if outcome is not None:
                outcome.group = groups[index]  # the driver's own object (the executor's is a copy)
                yield outcome
            elif failed is None:
                failed = error
        if failed is not None:
            raise rebuilt_error(failed)
        self.context.before_commit()


# -- the driver ----------------------------------------------------------------------------------


def executor_options(context: JobContext, table: IcebergTable) -> dict[str, Any]:
    """Storage options for executors: the job's, else (a catalog table) the ones its catalog's FileIO uses."""
    given = context.storage_options or storage_options_from_properties(table.table.io.properties)
    return executor_storage_options(table.metadata_location, given)


def run(context: JobContext, lake_table: IcebergLakeTable) -> dict[str, Any]:
    """The job on an Iceberg table (the module docstring); the table was opened and checked through the facade."""
    args = context.args
    table = lake_table.native
    target = parse_memory_size(args.target_file_size) if args.target_file_size else None
    merged, where = compaction_arguments(
        option_map(args.option), args.where, partition_filters(args.partition), args.min_file_count, target
    )
    options: dict[str, str] | CompactionOptions = merged
    if (
        args.strategy is not None or args.sort_order is not None
    ):  # as the facade: the run takes them in options
        options = CompactionOptions.from_options(
            merged, table.metadata.properties, strategy=args.strategy, sort_order=args.sort_order
        )
    result = compact_data(
        table,
        options,
        dry_run=args.dry_run,
        where=where,
        snapshot_properties={COMMIT_USER_PROPERTY: args.commit_user} if args.commit_user else None,
        rewriter=SparkRewriter(context, executor_options(context, table)),
    )
    return result.to_json()
