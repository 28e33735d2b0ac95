"""``LakeformatWriteOperator``: write a batch of rows (Parquet, CSV, JSON lines) into a table and commit it.

``execution="local"`` reads the source in the worker (``core.sources.read_source``), writes data files in
the table's layout (Paimon: ``write_data_files``; Iceberg: pyiceberg's append through the core,
``core/iceberg/write/write.py``) and commits them; ``"spark"`` submits the ``write`` Spark job (Paimon tables only),
which writes on the executors and commits on the driver. Either way the commit is exactly once per task
instance: the commit user is stable per DAG and task and the commit identifier is derived from the DAG
run, the task, its map index and the source (:func:`~airflow_lakeformat.operators.commit.commit_identifier`),
so an Airflow retry after a failure that happened after publishing finds its snapshot and reports
``alreadyCommitted`` instead of writing the rows twice (Iceberg keeps both in the snapshot summary). Both
formats' writes are the facade's (``core/table_writes.py``, ``table_writes(table).write_rows``). On an Iceberg
table ``overwrite="dynamic"`` replaces the partitions the rows fall into, ``"*"`` and ``"k=v"`` the rows they
select (one ``overwrite`` snapshot).

Writes take no maintenance lock (appends do not conflict with maintenance; the commit's conflict check
covers the rest). On success the table's Asset gets an event with the snapshot id as extra.

Example:
    >>> LakeformatWriteOperator(task_id="write", table="analytics.events", source="s3://landing/batch.parquet")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_lakeformat.core.table_writes import overwrite_text, table_writes
from airflow_lakeformat.hooks.lakeformat import DEFAULT_CONN_ID
from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator
from airflow_lakeformat.operators.commit import (
    commit_identifier,
    emit_table_event,
    staged_digest,
    table_event_uri,
    table_outlets,
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
    :param row_kind_column: Paimon primary-key tables: the source column holding each row's kind (``+I``,
        ``-U``, ``+U``, ``-D``; default: the table's ``rowkind.field``, else every row is ``+I``). Templated.
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
        "row_kind_column",
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
        row_kind_column: str | None = None,
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        emit_asset: bool = True,
        **kwargs: Any,
    ) -> None:
        self.asset_alias = table_outlets(
            kwargs, table, kwargs.get("iceberg_conn_id") or lakeformat_conn_id, emit_asset
        )
        kwargs.setdefault("execution", "local")
        kwargs.setdefault("maintenance_lock", False)
        super().__init__(table=table, lakeformat_conn_id=lakeformat_conn_id, **kwargs)
        self.source = source
        self.source_format = source_format
        self.overwrite = overwrite
        self.commit_user = commit_user
        self.row_kind_column = row_kind_column
        self.emit_asset = emit_asset
        self._event_uri: str | None = None
        self._root_event_uri = ""

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
            emit_table_event(self, context, self._event_uri, result, also=[self._root_event_uri])
        return result

    def check_table(self, table: LakeTable) -> None:
        self._event_uri = table_event_uri(table, self.table, self.conn_id_in_use)
        self._root_event_uri = table_event_uri(table)
        writes = table_writes(table)
        writes.check_overwrite(self.overwrite)  # a malformed overwrite fails before any work
        if self.row_kind_column and not writes.merges_rows_by_key():
            from airflow_lakeformat.core.errors import UsageError

            raise UsageError(
                f"{table.uri}: row_kind_column is for rows written into a Paimon primary-key table"
            )

    def run_local(self, context: Context, table: LakeTable) -> dict[str, Any]:
        user, identifier = self._identity(context)
        document: dict[str, Any] = {
            "operation": "write",
            "format": table.format,
            "commitUser": user,
            "commitIdentifier": identifier,
            "dryRun": self.is_dry_run,
        }
        fields = table_writes(table).write_rows(
            lambda: self._read_source(table),
            commit_user=user,
            commit_identifier=identifier,
            overwrite=self.overwrite,
            dry_run=self.is_dry_run,
            **({"row_kind_column": self.row_kind_column} if self.row_kind_column else {}),
        )
        discarded = fields.pop("discarded", None)
        if fields.get("alreadyCommitted"):
            self.log.info(
                "Snapshot %s already holds this write (identifier %s)%s",
                fields["snapshotId"],
                identifier,
                "" if discarded is None else f"; discarded the {discarded} files this run wrote",
            )
        return {**document, **fields}

    def _read_source(self, table: LakeTable) -> pa.Table:
        """The source's rows as the table's columns (``core.sources``: the table's types, nothing inferred):
        one file, or every file of the format under a directory (in name order)."""
        import fsspec
        import pyarrow as pa

        from airflow_lakeformat.core.errors import RegisterError
        from airflow_lakeformat.core.sources import read_source
        from airflow_lakeformat.core.sources.schema import with_row_kind_column

        schema = with_row_kind_column(table.write_schema(), self.row_kind_column)
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

    def spark_refusal(self, table: LakeTable) -> str | None:
        """The ``write`` job writes append tables: a primary-key table's upserts run in the worker (``auto``
        picks it there; ``execution="spark"`` is refused before anything is read)."""
        refusal = super().spark_refusal(table)
        if refusal is None and table_writes(table).merges_rows_by_key():
            return (
                "the Spark job write writes append tables only; a primary-key table's upserts run in the worker "
                "(execution='local' or 'auto')"
            )
        return refusal

    def spark_job_args(self, context: Context, table: LakeTable) -> list[str]:
        user, identifier = self._identity(context)
        args = ["--source", self.source, "--source-format", self._format()]
        args += ["--commit-user", user, "--commit-identifier", str(identifier)]
        overwrite = overwrite_text(self.overwrite)
        if overwrite is not None:
            # The text form keeps awkward values (blanks, commas, NULL) exact: a JSON object when needed.
            args += ["--overwrite", overwrite]
        return args
