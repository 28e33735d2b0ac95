"""``LakeformatCommitOperator``: commit data files that upstream tasks staged, exactly once per run.

Upstream tasks hand over either paths of Parquet files already placed in the table's layout (registered
with the core's ``register_files``: DataFileMeta and statistics come from each footer), or (Paimon only) the
ADD entries the core's ``write_data_files`` returned, passed through XCom with :func:`entries_to_xcom`. Lists
of lists (the XCom of a mapped upstream task) are flattened. An Iceberg table registers the staged Parquet
files with pyiceberg's ``add_files`` (``operators/iceberg_commits.py``); a partition overwrite of an Iceberg
table is refused (not implemented yet).

Exactly once: the commit user is stable per DAG and task (``<commit_user_prefix>-<dag_id>-<task_id>``), and
the commit identifier is a hash of the DAG run, the task, its map index and the staged files (Paimon keeps
both in the snapshot; Iceberg in the snapshot summary). An Airflow retry of this task therefore finds the
snapshot its earlier try published (when that try failed *after* publishing) and reports it as
``alreadyCommitted`` instead of committing the files again. Re-running the DAG run with new upstream
output stages other files, so it gets another identifier and commits them.

On success the table's Asset gets an event (with the snapshot id and kind as extra): the table's URI (an
Iceberg catalog table: ``iceberg://<catalog>/<namespace>/<table>``) when ``table`` is a literal URI, else
through an AssetAlias that the run resolves to the table's Asset.

Example:
    >>> LakeformatCommitOperator(task_id="commit", table="s3://lake/wh/db.db/orders", files=staged)  # doctest: +SKIP
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import AssetAlias
from airflow.sdk.exceptions import AirflowSkipException

from airflow_lakeformat.core.paimon.paths import PartitionSpec, parse_overwrite_spec
from airflow_lakeformat.hooks.lakeformat import DEFAULT_CONN_ID, table_asset
from airflow_lakeformat.operators.base import LakeformatBaseOperator, is_catalog_table

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.core.paimon.commit import CommitResult
    from airflow_lakeformat.core.paimon.manifest import ManifestEntry
    from airflow_lakeformat.core.paimon.table import Table
    from airflow_lakeformat.operators.base import LakeTable

ENTRY_FORMAT = "lakeformat.manifest-entry.v1"
# Paimon's batch commits use Long.MAX_VALUE; ours stay below it and positive.
_IDENTIFIER_MASK = (1 << 62) - 1


# -- staged entries through XCom -------------------------------------------------------------------


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, Mapping):
        if set(value) == {"$bytes"}:
            return base64.b64decode(value["$bytes"])
        if set(value) == {"$datetime"}:
            return datetime.fromisoformat(value["$datetime"])
        return {str(k): _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def entries_to_xcom(entries: Iterable[ManifestEntry]) -> list[dict[str, Any]]:
    """ADD entries (e.g. from ``write_data_files``) as JSON for XCom, losslessly (bytes and times tagged)."""
    return [{"format": ENTRY_FORMAT, "entry": _encode(entry.record)} for entry in entries]


def entries_from_xcom(documents: Iterable[Mapping[str, Any]]) -> list[ManifestEntry]:
    """The ADD entries back from :func:`entries_to_xcom`; anything else is refused with the reason."""
    from airflow_lakeformat.core.errors import RegisterError
    from airflow_lakeformat.core.paimon.manifest import FileKind, ManifestEntry

    entries = []
    for document in documents:
        if document.get("format") != ENTRY_FORMAT or not isinstance(document.get("entry"), Mapping):
            raise RegisterError(
                "<xcom>", f"not a staged file or {ENTRY_FORMAT} document: {str(document)[:200]}"
            )
        record = _decode(document["entry"])
        file_record = record.get("_FILE")
        missing = [
            k
            for k in ("_FILE_NAME", "_FILE_SIZE", "_ROW_COUNT")
            if not isinstance(file_record, dict) or k not in file_record
        ]
        if missing or not isinstance(record.get("_PARTITION"), bytes):
            raise RegisterError(
                "<xcom>", f"staged entry lacks {missing or ['_PARTITION']}: {str(document)[:200]}"
            )
        try:
            entry = ManifestEntry(record)
        except (KeyError, ValueError) as exc:
            raise RegisterError(
                str(file_record.get("_FILE_NAME")), f"not a valid staged entry ({exc})"
            ) from exc
        if entry.kind is not FileKind.ADD:
            raise RegisterError(entry.file.file_name, "a staged entry must ADD a file")
        entries.append(entry)
    return entries


def flatten_staged(value: Any) -> list[str | Mapping[str, Any]]:
    """Paths and entry documents from whatever upstream returned: one, a list, or lists of lists."""
    if value is None:
        return []
    if isinstance(value, (str, Mapping)):
        return [value]
    if isinstance(value, Iterable):
        return [item for element in value for item in flatten_staged(element)]
    raise TypeError(f"staged files must be paths or entry documents, not {type(value).__name__}")


# -- identity of a commit ------------------------------------------------------------------------


def staged_digest(staged: Sequence[str | Mapping[str, Any]]) -> str:
    """A digest of what is staged, independent of its order."""
    keys = sorted(item if isinstance(item, str) else json.dumps(item, sort_keys=True) for item in staged)
    return hashlib.sha256("\n".join(keys).encode("utf-8")).hexdigest()


def commit_identifier(dag_id: str, run_id: str, task_id: str, map_index: int, digest: str) -> int:
    """The same number for every try of one task instance committing the same files."""
    scope = "\0".join((dag_id, run_id, task_id, str(map_index), digest))
    return int.from_bytes(hashlib.sha256(scope.encode("utf-8")).digest()[:8], "big") & _IDENTIFIER_MASK


def parse_overwrite(value: Mapping[str, Any] | str | None) -> tuple[bool, PartitionSpec | None]:
    """(overwrite?, partition filter): ``"*"`` is the whole table, ``"k=v,k2=v2"`` or a dict a partition."""
    if value is None or value == {} or (isinstance(value, str) and not value.strip()):
        return False, None
    return True, parse_overwrite_spec(value)


class LakeformatCommitOperator(LakeformatBaseOperator):
    """Commit staged data files to a table as one snapshot, once per DAG run.

    :param table: full table URI, or ``db.table`` under the connection's warehouse. Templated.
    :param files: what upstream staged: paths (table-relative or full) of Parquet files in the table's
        layout, and/or documents from :func:`entries_to_xcom`; an XComArg works. Templated.
    :param overwrite: ``"*"`` (the whole table), a partition as ``{"dt": "2024-01-01"}`` or ``"dt=2024-01-01"``;
        the partition's live files are replaced by the staged ones. Templated.
    :param commit_user: the Paimon commit user (default: the connection's prefix, DAG id and task id).
    :param emit_asset: emit an Asset event for the table on success.

    Nothing staged skips the task. The XCom result is the commit's JSON (``snapshotId``, ``commitKind``,
    ``commitUser``, ``commitIdentifier``, ``alreadyCommitted``, record counts) plus the file counts.
    """

    template_fields: Sequence[str] = (
        *LakeformatBaseOperator.template_fields,
        "files",
        "overwrite",
        "commit_user",
    )

    def __init__(
        self,
        *,
        table: str,
        files: Any,
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        overwrite: Mapping[str, Any] | str | None = None,
        commit_user: str | None = None,
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
        super().__init__(table=table, lakeformat_conn_id=lakeformat_conn_id, **kwargs)
        self.files = files
        self.overwrite = overwrite
        self.commit_user = commit_user
        self.emit_asset = emit_asset

    def run(self, context: Context, table_uri: str) -> dict[str, Any]:
        staged = flatten_staged(self.files)
        if not staged:
            raise AirflowSkipException(f"nothing staged to commit to {table_uri}")
        table = self.open_lake_table(table_uri)
        ti = context["ti"]
        map_index = getattr(ti, "map_index", -1)
        identifier = commit_identifier(
            ti.dag_id, context["run_id"], ti.task_id, map_index, staged_digest(staged)
        )
        user = self.commit_user or self.task_commit_user(context)
        if table.format == "iceberg":
            fields = self._commit_iceberg(table, staged, user, identifier)
        else:
            result, added, deleted = self._commit(table.native, staged, user, identifier)  # type: ignore[arg-type]
            fields = {**result.to_json(), "filesAdded": added, "filesDeleted": deleted}
        document = {
            "operation": "commit",
            "table": table.uri,
            "format": table.format,
            "dryRun": False,
            **fields,
        }
        if self.emit_asset:
            emit_table_event(self, context, table_event_uri(table), document)
        return document

    def _commit_iceberg(
        self, table: LakeTable, staged: list[str | Mapping[str, Any]], user: str, identifier: int
    ) -> dict[str, Any]:
        from airflow_lakeformat.core.errors import RegisterError
        from airflow_lakeformat.operators.iceberg_commits import (
            add_data_files,
            refuse_overwrite,
            snapshot_fields,
        )

        native = table.native
        refuse_overwrite(native, parse_overwrite(self.overwrite)[0])  # type: ignore[arg-type]
        documents = [item for item in staged if not isinstance(item, str)]
        if documents:
            raise RegisterError(
                table.uri,
                f"{len(documents)} staged Paimon manifest entries cannot be committed to an Iceberg table; "
                "stage Parquet file paths instead",
            )
        paths = [item for item in staged if isinstance(item, str)]
        snapshot, landed = add_data_files(native, paths, user, identifier)  # type: ignore[arg-type]
        if landed:
            self.log.info(
                "Snapshot %s already holds this commit (identifier %s)", snapshot.snapshot_id, identifier
            )
        return {
            **snapshot_fields(snapshot),
            "alreadyCommitted": landed,
            "filesAdded": len(paths),
            "filesDeleted": 0,
        }

    def _commit(
        self, table: Table, staged: list[str | Mapping[str, Any]], user: str, identifier: int
    ) -> tuple[CommitResult, int, int]:
        from airflow_lakeformat.core.paimon.commit import CommitResult, Committer
        from airflow_lakeformat.core.paimon.snapshot import CommitKind
        from airflow_lakeformat.core.paimon.write.register import register_files

        overwrite, partition_filter = parse_overwrite(self.overwrite)
        kind = CommitKind.OVERWRITE if overwrite else CommitKind.APPEND
        committer = Committer(table, user)
        landed = committer.find_landed(identifier, kind)
        if landed is not None:
            # An earlier try published this very commit and failed afterwards: do not commit again.
            self.log.info(
                "Snapshot %s already holds this commit (identifier %s); not committing again",
                landed.id,
                identifier,
            )
            return CommitResult(landed, 0, already_committed=True), len(staged), 0
        paths = [item for item in staged if isinstance(item, str)]
        entries = entries_from_xcom([item for item in staged if not isinstance(item, str)])
        self._check_staged_files(table, entries)
        adds = register_files(table, paths) + entries
        deletes = committer.overwrite_entries(partition_filter) if overwrite else []
        result = committer.commit(
            [*deletes, *adds], kind=kind, commit_identifier=identifier, check_conflicts=True
        )
        return result, len(adds), len(deletes)

    @staticmethod
    def _check_staged_files(table: Table, entries: Sequence[ManifestEntry]) -> None:
        """A staged entry must describe a file that is there, at its size: never commit a dangling file."""
        from airflow_lakeformat.core.errors import RegisterError
        from airflow_lakeformat.core.paimon.paths import DataFilePaths

        paths = DataFilePaths(table.schema)
        for entry in entries:
            if entry.file.external_path:
                continue  # outside the table; its writer vouches for it
            path = table.io.join(table.root, paths.relative_path(entry))
            try:
                size = table.io.size(path)
            except FileNotFoundError:
                raise RegisterError(table.io.uri(path), "staged file does not exist") from None
            if size != entry.file.file_size:
                raise RegisterError(
                    table.io.uri(path),
                    f"staged file has {size} bytes, its DataFileMeta says {entry.file.file_size}",
                )


def table_event_uri(table: LakeTable) -> str:
    """The Asset URI of a table's events: its root URI, or ``iceberg://<catalog>/<namespace>/<table>``."""
    if is_catalog_table(table):
        native = table.native.table  # type: ignore[union-attr]
        *namespace, name = native.name()
        return f"iceberg://{native.catalog.name}/{'/'.join(namespace)}/{name}"
    return table_asset(table.uri).uri


def emit_table_event(operator: Any, context: Context, asset_uri: str, document: Mapping[str, Any]) -> None:
    """The table's Asset event (extra: ``snapshotId``, ``commitKind``): through the operator's AssetAlias when
    the table was named relative to the connection or templated, else on the matching outlet."""
    from airflow.sdk import Asset

    extra = {"snapshotId": document["snapshotId"], "commitKind": document.get("commitKind")}
    events = context["outlet_events"]
    if operator.asset_alias is not None:
        events[operator.asset_alias].add(Asset(uri=asset_uri), extra=extra)
        return
    for outlet in operator.outlets:
        if getattr(outlet, "uri", None) == asset_uri:
            events[outlet].extra = extra
