"""``LakeformatCommitOperator``: commit data files that upstream tasks staged, exactly once per run.

Upstream tasks hand over either paths of Parquet files already placed in the table's layout (registered
with the core's ``register_files``: DataFileMeta and statistics come from each footer), or (Paimon only) the
ADD entries the core's ``write_data_files`` returned, passed through XCom with :func:`entries_to_xcom`. Lists
of lists (the XCom of a mapped upstream task) are flattened. An Iceberg table registers the staged Parquet
files with pyiceberg's ``add_files``; a partition overwrite of an Iceberg table is refused (not implemented
yet). Both formats' commits are the facade's (``core/table_writes.py``, ``table_writes(table).commit_files``).

Exactly once: the commit user is stable per DAG and task (``<commit_user_prefix>-<dag_id>-<task_id>``), and
the commit identifier is a hash of the DAG run, the task, its map index and the staged files (Paimon keeps
both in the snapshot; Iceberg in the snapshot summary). An Airflow retry of this task therefore finds the
snapshot its earlier try published (when that try failed *after* publishing) and reports it as
``alreadyCommitted`` instead of committing the files again. Re-running the DAG run with new upstream
output stages other files, so it gets another identifier and commits them.

On success the table's Asset gets an event (with the snapshot id and kind as extra): the table's root URI when
``table`` is a literal URI, ``lakeformat://<conn_id>/<name>`` (``hooks/assets.py``; no connection read when the
DAG is parsed) when it is a name the connection places; a templated table goes through an AssetAlias that the
run resolves to one of those Assets.

Example:
    >>> LakeformatCommitOperator(task_id="commit", table="s3://lake/wh/db.db/orders", files=staged)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset, AssetAlias
from airflow.sdk.exceptions import AirflowSkipException

from airflow_lakeformat.core.table_writes import (
    ENTRY_FORMAT,
    entries_from_xcom,
    entries_to_xcom,
    overwrite_filter,
    table_writes,
)
from airflow_lakeformat.hooks.assets import is_relative_name, table_asset_uri
from airflow_lakeformat.hooks.lakeformat import DEFAULT_CONN_ID, table_asset
from airflow_lakeformat.operators.base import LakeformatBaseOperator

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.operators.base import LakeTable

__all__ = [
    "ENTRY_FORMAT",
    "LakeformatCommitOperator",
    "commit_identifier",
    "emit_table_event",
    "entries_from_xcom",
    "entries_to_xcom",
    "flatten_staged",
    "parse_overwrite",
    "staged_digest",
    "table_event_uri",
    "table_outlets",
]

# Paimon's batch commits use Long.MAX_VALUE; ours stay below it and positive.
_IDENTIFIER_MASK = (1 << 62) - 1


# -- staged files ---------------------------------------------------------------------------------


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


def parse_overwrite(value: Mapping[str, Any] | str | None) -> tuple[bool, dict[str, str | None] | None]:
    """(overwrite?, partition filter): ``"*"`` is the whole table, ``"k=v,k2=v2"`` or a dict a partition."""
    return overwrite_filter(value)


def table_outlets(
    operator_kwargs: dict[str, Any], table: str, conn_id: str, emit_asset: bool
) -> AssetAlias | None:
    """Give an operator that commits to ``table`` its outlet (unless the DAG set ``outlets``): the table's
    Asset when ``table`` and the connection id are literal (``table_asset_uri``: the root URI, or
    ``lakeformat://<conn_id>/<name>`` for a name the connection places), else an AssetAlias the run resolves
    (returned)."""
    if not emit_asset or "outlets" in operator_kwargs:
        return None
    if "{{" not in table and "{{" not in conn_id:
        # A literal URI is its root's Asset; a literal name the connection's ``lakeformat://`` Asset (no lookup).
        operator_kwargs["outlets"] = [Asset(uri=table_asset_uri(table, conn_id))]
        return None
    # Which table a relative or templated name means is known only at run time.
    alias = AssetAlias(name=f"lakeformat:{conn_id}:{table}")
    operator_kwargs["outlets"] = [alias]
    return alias


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
        self.asset_alias = table_outlets(
            kwargs, table, kwargs.get("iceberg_conn_id") or lakeformat_conn_id, emit_asset
        )
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
        fields = table_writes(table).commit_files(
            staged, commit_user=user, commit_identifier=identifier, overwrite=self.overwrite
        )
        if fields.get("alreadyCommitted"):
            # An earlier try published this very commit and failed afterwards: not committed again.
            self.log.info(
                "Snapshot %s already holds this commit (identifier %s)", fields["snapshotId"], identifier
            )
        document = {
            "operation": "commit",
            "table": table.uri,
            "format": table.format,
            "dryRun": False,
            **fields,
        }
        if self.emit_asset:
            event_uri = table_event_uri(table, self.table, self.conn_id_in_use)
            emit_table_event(self, context, event_uri, document, also=[table_event_uri(table)])
        return document


def table_event_uri(table: LakeTable, name: str | None = None, conn_id: str | None = None) -> str:
    """The Asset URI of a table's events: ``lakeformat://<conn_id>/<name>`` when the operator named the table
    relative to its connection (``name``, rendered), else its root URI, or for a catalog table named otherwise
    ``iceberg://<catalog>/<namespace>/<table>``."""
    if name is not None and conn_id is not None and is_relative_name(name):
        return table_asset_uri(name, conn_id)
    identifier = table_writes(table).catalog_identifier()
    if identifier is not None:
        catalog, namespace, name = identifier
        return f"iceberg://{catalog}/{'/'.join(namespace)}/{name}"
    return table_asset(table.uri).uri


def emit_table_event(
    operator: Any,
    context: Context,
    asset_uri: str,
    document: Mapping[str, Any],
    also: Iterable[str] = (),
) -> None:
    """The table's Asset event (extra: ``snapshotId``, ``commitKind``): through the operator's AssetAlias when
    the table or the connection id was templated, else on the outlet whose URI is ``asset_uri`` or one of
    ``also`` (the table's root URI: a DAG that set its own outlet named by the root keeps its extra)."""
    extra = {"snapshotId": document["snapshotId"], "commitKind": document.get("commitKind")}
    events = context["outlet_events"]
    if operator.asset_alias is not None:
        events[operator.asset_alias].add(Asset(uri=asset_uri), extra=extra)
        return
    for outlet in operator.outlets:
        if getattr(outlet, "uri", None) in (asset_uri, *also):
            events[outlet].extra = extra
