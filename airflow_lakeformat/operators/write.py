"""``LakeformatWriteOperator``: write a batch of rows (Parquet, CSV, JSON lines) into a table and commit it.

``execution="local"`` reads the source in the worker (``core.sources.read_source``), writes data files in
the table's layout (Paimon: ``write_data_files``; Iceberg: pyiceberg's append through the core,
``core/iceberg/write/write.py``) and commits them; ``"spark"`` submits the ``write`` Spark job (Paimon tables only),
which writes on the executors and commits on the driver. Either way the commit is exactly once per task
instance: the commit user is stable per DAG and task and the commit identifier is derived from the DAG
run, the task, its map index and the source (:func:`~airflow_lakeformat.operators.commit.commit_identifier`),
so an Airflow retry after a failure that happened after publishing finds its snapshot and reports
``alreadyCommitted`` instead of writing the rows twice (Iceberg keeps both in the snapshot summary,
``operators/iceberg_commits.py``). A partition overwrite of an Iceberg table is refused (not implemented yet).

Writes take no maintenance lock (appends do not conflict with maintenance; the commit's conflict check
covers the rest). On success the table's Asset gets an event with the snapshot id as extra.

Example:
    >>> LakeformatWriteOperator(task_id="write", table="analytics.events", source="s3://landing/batch.parquet")  # doctest: +SKIP
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import AssetAlias

from airflow_lakeformat.core.paimon.paths import format_partition_spec
from airflow_lakeformat.hooks.lakeformat import DEFAULT_CONN_ID, table_asset
from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator
from airflow_lakeformat.operators.commit import (
    commit_identifier,
    emit_table_event,
    parse_overwrite,
    staged_digest,
    table_event_uri,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from airflow.sdk import Context

    from airflow_lakeformat.operators.base import LakeTable

SOURCE_FORMATS = ("parquet", "csv", "json")
_EXTENSIONS = {"parquet": (".parquet",), "csv": (".csv",), "json": (".json", ".jsonl", ".ndjson")}


def source_format_of(source: str, source_format: str | None) -> str:
    """The given format, or the one the source's extension names."""
    if source_format:
        if source_format not in SOURCE_FORMATS:
            raise ValueError(
                f"source_format must be one of {', '.join(SOURCE_FORMATS)}, not {source_format!r}"
            )
        return source_format
    lower = source.lower().rstrip("/")
    for name, extensions in _EXTENSIONS.items():
        if lower.endswith(extensions):
            return name
    raise ValueError(f"source {source!r}: cannot tell its format from the name; set source_format")


class LakeformatWriteOperator(LakeformatMaintenanceOperator):
    """Write the rows of ``source`` into the table as one snapshot, once per task instance.

    :param table: full table URI, or ``db.table`` under the connection's warehouse. Templated.
    :param source: a file, or a directory of files of one format (local path, ``file://``, ``s3://``). Templated.
    :param source_format: ``parquet``, ``csv`` or ``json`` (one object per line); default from the extension.
        Templated.
    :param overwrite: ``"*"`` (the whole table) or a partition (``"dt=2024-01-01"`` or a dict): its live
        files are replaced by the new ones. Templated.
    :param commit_user: the commit user (default: the connection's prefix, DAG id and task id). Templated.
    :param execution: ``"local"`` (default) or ``"spark"`` (the ``write`` job, Paimon tables only); ``"auto"``
        picks Spark by the table's size like the maintenance operators. Templated.
    :param dry_run: read and check the source, write nothing. Templated.
    :param emit_asset: emit an Asset event for the table on success.

    The XCom result is the write's JSON (``operation: write``, ``table``, ``format``, ``dryRun``,
    ``snapshotId``, ``filesWritten``, ``rowsWritten``, ``bytesWritten``, ``commitUser``, ``commitIdentifier``,
    ``alreadyCommitted``) plus ``execution``.
    """

    template_fields: Sequence[str] = (
        *LakeformatMaintenanceOperator.template_fields,
        "source",
        "source_format",
        "overwrite",
        "commit_user",
    )
    operation = "write"
    spark_job = "write"

    def __init__(
        self,
        *,
        table: str,
        source: str,
        source_format: str | None = None,
        overwrite: Mapping[str, Any] | str | None = None,
        commit_user: str | None = None,
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        emit_asset: bool = True,
        **kwargs: Any,
    ) -> None:
        self.asset_alias: AssetAlias | None = None
        if emit_asset and "outlets" not in kwargs:
            if "{{" not in table and ("://" in table or table.startswith("/")):
                kwargs["outlets"] = [table_asset(table)]
            else:
                # Which table a relative or templated name means is known only at run time.
                self.asset_alias = AssetAlias(name=f"lakeformat:{lakeformat_conn_id}:{table}")
                kwargs["outlets"] = [self.asset_alias]
        kwargs.setdefault("execution", "local")
        kwargs.setdefault("maintenance_lock", False)
        super().__init__(table=table, lakeformat_conn_id=lakeformat_conn_id, **kwargs)
        self.source = source
        self.source_format = source_format
        self.overwrite = overwrite
        self.commit_user = commit_user
        self.emit_asset = emit_asset
        self._event_uri: str | None = None

    # -- identity ----------------------------------------------------------------------------------

    def _identity(self, context: Context) -> tuple[str, int]:
        ti = context["ti"]
        map_index = getattr(ti, "map_index", -1)
        what = [f"source={self.source}", f"format={self._format()}", f"overwrite={self.overwrite!r}"]
        identifier = commit_identifier(
            ti.dag_id, context["run_id"], ti.task_id, map_index, staged_digest(what)
        )
        user = self.commit_user or self.task_commit_user(context)
        return user, identifier

    def _format(self) -> str:
        return source_format_of(self.source, self.source_format)

    # -- running -----------------------------------------------------------------------------------

    def run(self, context: Context, table_uri: str) -> dict[str, Any]:
        result = super().run(context, table_uri)
        done = result.get("snapshotId") is not None and not result.get("dryRun")
        if self.emit_asset and done and self._event_uri is not None:
            emit_table_event(self, context, self._event_uri, result)
        return result

    def check_table(self, table: LakeTable) -> None:
        self._event_uri = table_event_uri(table)
        if table.format == "iceberg":
            from airflow_lakeformat.operators.iceberg_commits import refuse_overwrite

            refuse_overwrite(table.native, parse_overwrite(self.overwrite)[0])  # type: ignore[arg-type]

    def _run_iceberg(self, context: Context, table: LakeTable, document: dict[str, Any]) -> dict[str, Any]:
        from airflow_lakeformat.operators.iceberg_commits import append_rows, find_landed, snapshot_fields

        started = time.monotonic()
        native = table.native
        user, identifier = document["commitUser"], document["commitIdentifier"]
        landed = find_landed(native, user, identifier)  # type: ignore[arg-type]
        empty = {"filesWritten": 0, "rowsWritten": 0, "bytesWritten": 0, "filesDeleted": 0}
        if landed is not None:
            self.log.info(
                "Snapshot %s already holds this write (identifier %s)", landed.snapshot_id, identifier
            )
            return {**document, **empty, "snapshotId": landed.snapshot_id, "alreadyCommitted": True}
        data = self._read_source(table)
        if self.is_dry_run:
            return {
                **document,
                **empty,
                "snapshotId": None,
                "alreadyCommitted": False,
                "sourceRows": data.num_rows,
                "durationSeconds": round(time.monotonic() - started, 3),
            }
        snapshot, already = append_rows(native, data, user, identifier)  # type: ignore[arg-type]
        summary = snapshot.summary
        return {
            **document,
            "filesWritten": int(summary.get("added-data-files") or 0) if summary is not None else 0,
            "rowsWritten": data.num_rows,
            "bytesWritten": int(summary.get("added-files-size") or 0) if summary is not None else 0,
            "filesDeleted": 0,
            **snapshot_fields(snapshot),
            "alreadyCommitted": already,
            "durationSeconds": round(time.monotonic() - started, 3),
        }

    def run_local(self, context: Context, table: LakeTable) -> dict[str, Any]:
        from airflow_lakeformat.core.paimon.commit import Committer
        from airflow_lakeformat.core.paimon.snapshot import CommitKind
        from airflow_lakeformat.core.paimon.write.data_files import write_data_files
        from airflow_lakeformat.core.paimon.written_files import commit_written_files

        started = time.monotonic()
        user, identifier = self._identity(context)
        document: dict[str, Any] = {
            "operation": "write",
            "format": table.format,
            "commitUser": user,
            "commitIdentifier": identifier,
            "dryRun": self.is_dry_run,
        }
        if table.format == "iceberg":
            return self._run_iceberg(context, table, document)
        native: Any = table.native
        overwrite, partition_filter = parse_overwrite(self.overwrite)
        kind = CommitKind.OVERWRITE if overwrite else CommitKind.APPEND
        committer = Committer(native, user)
        empty = {"filesWritten": 0, "rowsWritten": 0, "bytesWritten": 0, "filesDeleted": 0}
        landed = committer.find_landed(identifier, kind)
        if landed is not None:
            self.log.info("Snapshot %s already holds this write (identifier %s)", landed.id, identifier)
            return {**document, **empty, "snapshotId": landed.id, "alreadyCommitted": True}
        data = self._read_source(table)
        if self.is_dry_run:
            return {
                **document,
                **empty,
                "snapshotId": None,
                "alreadyCommitted": False,
                "sourceRows": data.num_rows,
                "durationSeconds": round(time.monotonic() - started, 3),
            }
        entries = write_data_files(native, data)
        if not entries and not (overwrite and committer.overwrite_entries(partition_filter)):
            return {**document, **empty, "snapshotId": None, "alreadyCommitted": False}
        done = commit_written_files(
            committer,
            entries,
            overwrite=overwrite,
            partition_filter=partition_filter,
            commit_identifier=identifier,
        )
        result = done.result
        if result.already_committed:
            self.log.info(
                "Snapshot %s already holds this write; discarded the %s files this run wrote",
                result.snapshot.id,
                done.discarded,
            )
            return {**document, **empty, "snapshotId": result.snapshot.id, "alreadyCommitted": True}
        return {
            **document,
            "filesWritten": len(entries),
            "rowsWritten": sum(e.file.row_count for e in entries),
            "bytesWritten": sum(e.file.file_size for e in entries),
            "filesDeleted": len(done.deletes),
            "snapshotId": result.snapshot.id,
            "alreadyCommitted": False,
            "commitKind": result.snapshot.commit_kind.value,
            "durationSeconds": round(time.monotonic() - started, 3),
        }

    def _read_source(self, table: LakeTable) -> pa.Table:
        """The source's rows as the table's columns (``core.sources``: the table's types, nothing inferred):
        one file, or every file of the format under a directory (in name order)."""
        import fsspec
        import pyarrow as pa

        from airflow_lakeformat.core.errors import RegisterError
        from airflow_lakeformat.core.sources import read_source

        schema = table.write_schema()
        options = self.hook.storage_options(self.source)
        fs, path = fsspec.core.url_to_fs(self.source, **options)
        if not fs.isdir(path):
            if not fs.exists(path):
                raise RegisterError(self.source, "source does not exist")
            return read_source(self.source, schema, options)
        extensions = _EXTENSIONS[self._format()]
        files = sorted(p for p in fs.find(path) if p.lower().endswith(extensions))
        if not files:
            raise RegisterError(self.source, f"no {'/'.join(extensions)} files in the source directory")
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        prefix = "" if protocol in ("file", "local") else f"{protocol}://"
        return pa.concat_tables([read_source(prefix + f, schema, options) for f in files])

    def spark_job_args(self, context: Context, table: LakeTable) -> list[str]:
        user, identifier = self._identity(context)
        args = ["--source", self.source, "--source-format", self._format()]
        args += ["--commit-user", user, "--commit-identifier", str(identifier)]
        overwrite, partition_filter = parse_overwrite(self.overwrite)
        if overwrite:
            # The text form keeps awkward values (blanks, commas, NULL) exact: a JSON object when needed.
            args += ["--overwrite", format_partition_spec(partition_filter)]
        return args
