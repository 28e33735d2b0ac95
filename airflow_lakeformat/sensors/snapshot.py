"""``LakeformatSnapshotSensor``: wait for a new snapshot of a Paimon or an Iceberg table, on a branch.

"New" means committed after ``after_snapshot_id`` (Paimon: an id above it; Iceberg, whose ids are random: a
snapshot above it on the branch's ancestry, see ``triggers/watch.py``), passing the filters (commit kinds to
ignore, a minimum of new records). Left at None, it means newer than the snapshot the previous
run of this sensor matched. That id is kept in an Airflow Variable keyed by DAG, task, map index and table
(the sensor logs the key; delete the Variable to start over). A Variable, because it is the one store the
task SDK lets a task both read and write that outlives a DAG run and does not depend on how runs are
ordered: XCom lookups of "the previous run" follow logical dates, which manual runs may not have, and the
asset state store needs the table's Asset declared at parse time, which a table named relative to a
connection cannot give.

The record also remembers the baseline of the run that wrote it, so every poke of a rescheduled sensor,
a retry and a cleared-and-rerun task all wait for the same thing and match the same snapshot again. With
the first run of a sensor there is no record, and the baseline is the table's latest snapshot at the
first poke. Runs of one sensor that overlap in time share the record; give ``after_snapshot_id`` (templated)
or ``max_active_runs=1`` when that matters.

Example:
    >>> LakeformatSnapshotSensor(task_id="wait", table="analytics.events", ignore_commit_kinds=["COMPACT"],
    ...                          deferrable=True, poll_interval=60)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_lakeformat.hooks.lakeformat import DEFAULT_CONN_ID, LakeformatHook, choose_conn_id
from airflow_lakeformat.operators.templated import optional_int

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.core.tables import IcebergLakeTable, PaimonTable
    from airflow_lakeformat.triggers.watch import Watch

    LakeTable = PaimonTable | IcebergLakeTable

VARIABLE_PREFIX = "lakeformat_snapshot_sensor"


class LakeformatSnapshotSensor(BaseSensorOperator):
    """Wait for a snapshot newer than ``after_snapshot_id`` that passes the filters; XCom gets the snapshot.

    :param table: the table (full URI, ``db.table`` under the connection's warehouse, or ``namespace.table``
        of the connection's Iceberg catalog). Templated.
    :param lakeformat_conn_id: the ``lakeformat`` connection. Templated.
    :param iceberg_conn_id: instead, a connection of the official Iceberg provider (type ``iceberg``) as the
        catalog of ``namespace.table``; giving both is refused. Templated.
    :param table_format: ``"paimon"``, ``"iceberg"`` or None (the connection's, else detected). Templated.
    :param branch: the branch to watch (default ``main``). Templated.
    :param after_snapshot_id: wait for a snapshot after this one; None continues after the snapshot the
        previous run of this sensor matched. Templated.
    :param ignore_commit_kinds: commit kinds that do not count, e.g. ``["COMPACT"]`` (Paimon's kinds or
        Iceberg's operations; ``COMPACT`` and ``REPLACE`` each ignore both).
    :param min_new_records: the matched snapshots' net new records must add up to at least this.
    :param deferrable: hand the wait to the triggerer instead of holding a worker slot.
    :param poll_interval: seconds between looks at the table, in the triggerer and (unless ``poke_interval``
        is given too) in the worker's poke or reschedule mode (default: ``poke_interval``, 60 s).
    :param check_before_defer: look once in the worker before deferring (a match then needs no trigger).
    """

    template_fields: Sequence[str] = (
        "table",
        "lakeformat_conn_id",
        "iceberg_conn_id",
        "after_snapshot_id",
        "table_format",
        "branch",
    )
    ui_color = "#d6ecf3"

    def __init__(
        self,
        *,
        table: str,
        lakeformat_conn_id: str = DEFAULT_CONN_ID,
        iceberg_conn_id: str | None = None,
        table_format: str | None = None,
        branch: str = "main",
        after_snapshot_id: int | str | None = None,
        ignore_commit_kinds: Sequence[str] = (),
        min_new_records: int = 0,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float | None = None,
        check_before_defer: bool = True,
        **kwargs: Any,
    ) -> None:
        from airflow_lakeformat.triggers.watch import normalize_commit_kinds

        if poll_interval is not None:
            kwargs.setdefault("poke_interval", float(poll_interval))
        super().__init__(**kwargs)
        self.table = table
        choose_conn_id(lakeformat_conn_id, iceberg_conn_id)  # both (or neither) fails the DAG's parse
        self.lakeformat_conn_id = lakeformat_conn_id
        self.iceberg_conn_id = iceberg_conn_id
        self.table_format = table_format
        self.branch = branch
        self.after_snapshot_id = after_snapshot_id
        self.ignore_commit_kinds = list(normalize_commit_kinds(ignore_commit_kinds))
        self.min_new_records = int(min_new_records)
        self.deferrable = deferrable
        self.poll_interval = float(poll_interval) if poll_interval is not None else self.poke_interval
        self.check_before_defer = check_before_defer
        self._table: LakeTable | None = None
        self._watch: Watch | None = None

    @cached_property
    def hook(self) -> LakeformatHook:
        return LakeformatHook(self.lakeformat_conn_id, iceberg_conn_id=self.iceberg_conn_id)

    # -- the baseline ------------------------------------------------------------------------------

    def variable_key(self, context: Context, table_uri: str) -> str:
        ti = context["ti"]
        return sensor_variable_key(
            ti.dag_id, ti.task_id, getattr(ti, "map_index", -1), table_uri, self.branch or "main"
        )

    def resolve_baseline(self, context: Context, table: LakeTable) -> int:
        """The id to wait beyond (see the module docstring), recorded for later pokes and runs."""
        explicit = optional_int(self.after_snapshot_id, "after_snapshot_id")
        if explicit is not None:
            return explicit
        from airflow.sdk import Variable

        key = self.variable_key(context, table.uri)
        run_id = context["run_id"]
        record = Variable.get(key, default=None, deserialize_json=True)
        if isinstance(record, dict) and record.get("runId") == run_id:
            baseline = int(record["after"])
            self.log.info("Continuing this run's wait for a snapshot after %s (Variable %s)", baseline, key)
            return baseline
        if isinstance(record, dict) and record.get("snapshotId") is not None:
            baseline = int(record["snapshotId"])
            self.log.info(
                "Waiting for a snapshot after %s, matched by run %s (Variable %s)",
                baseline,
                record.get("runId"),
                key,
            )
        elif isinstance(record, dict) and record.get("after") is not None:
            baseline = int(record["after"])
            self.log.info(
                "Waiting for a snapshot after %s; run %s never matched one (Variable %s)",
                baseline,
                record.get("runId"),
                key,
            )
        else:
            from airflow_lakeformat.triggers.watch import latest_snapshot_id

            baseline = latest_snapshot_id(table, self.branch or "main")
            self.log.info(
                "First run of this sensor: waiting for a snapshot after the latest, %s (Variable %s)",
                baseline,
                key,
            )
        self._record(key, table.uri, run_id, baseline, None)
        return baseline

    def _record(self, key: str, table_uri: str, run_id: str, after: int, snapshot_id: int | None) -> None:
        from airflow.sdk import Variable

        value = {"table": table_uri, "runId": run_id, "after": after, "snapshotId": snapshot_id}
        Variable.set(
            key, value, description="last snapshot seen by a LakeformatSnapshotSensor", serialize_json=True
        )

    def _remember_match(self, context: Context, snapshot: dict[str, Any]) -> None:
        if optional_int(self.after_snapshot_id, "after_snapshot_id") is not None:
            return
        key = self.variable_key(context, snapshot["table"])
        self._record(
            key, snapshot["table"], context["run_id"], int(snapshot["afterSnapshotId"]), int(snapshot["id"])
        )

    # -- running -----------------------------------------------------------------------------------

    def _open(self) -> LakeTable:
        if self._table is None:
            self._table = self.hook.open_lake_table(
                self.table, self.table_format, branch=self.branch or "main"
            )
        return self._table

    def _check(self, context: Context) -> dict[str, Any] | None:
        """One look at the table: the matched snapshot's JSON, or None. Table problems fail the task."""
        from airflow_lakeformat.triggers.watch import describe_error, is_permanent, make_watch, poll

        try:
            table = self._open()
            if self._watch is None:
                self._watch = make_watch(
                    table.format,
                    self.resolve_baseline(context, table),
                    self.ignore_commit_kinds,
                    self.min_new_records,
                    self.branch or "main",
                )
            match = poll(self._watch, table)
        except Exception as exc:
            if is_permanent(exc):
                raise AirflowFailException(describe_error(exc)) from None
            raise
        return None if match is None else match.to_json()

    def _baseline_only(self, context: Context) -> int:
        from airflow_lakeformat.triggers.watch import describe_error, is_permanent

        try:
            return self.resolve_baseline(context, self._open())
        except Exception as exc:
            if is_permanent(exc):
                raise AirflowFailException(describe_error(exc)) from None
            raise

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if self.check_before_defer:
            snapshot = self._check(context)
            if snapshot is not None:
                return self._finish(context, snapshot)
            assert self._watch is not None
            baseline = self._watch.after_snapshot_id
        else:
            baseline = self._baseline_only(context)
        from airflow_lakeformat.triggers.snapshot import LakeformatSnapshotTrigger

        self.defer(
            trigger=LakeformatSnapshotTrigger(
                table=self.table,
                lakeformat_conn_id=self.lakeformat_conn_id,
                iceberg_conn_id=self.iceberg_conn_id,
                after_snapshot_id=baseline,
                ignore_commit_kinds=self.ignore_commit_kinds,
                min_new_records=self.min_new_records,
                poll_interval=self.poll_interval,
                table_format=self.table_format,
                branch=self.branch or "main",
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def poke(self, context: Context) -> bool | PokeReturnValue:
        snapshot = self._check(context)
        if snapshot is None:
            return False
        return PokeReturnValue(is_done=True, xcom_value=self._finish(context, snapshot))

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Resume after the trigger fired: the matched snapshot (returned, so it goes to XCom), or a failure."""
        if not isinstance(event, dict) or event.get("status") not in ("success", "error"):
            raise AirflowException(f"unexpected event from LakeformatSnapshotTrigger: {event!r}")
        if event["status"] == "error":
            raise AirflowFailException(str(event.get("message")))
        return self._finish(context, event["snapshot"])

    def _finish(self, context: Context, snapshot: dict[str, Any]) -> dict[str, Any]:
        self._remember_match(context, snapshot)
        self.log.info(
            "Snapshot %s (%s, %s new records over %s snapshot(s) after %s) of %s",
            snapshot["id"],
            snapshot["commitKind"],
            snapshot["newRecords"],
            snapshot["snapshotsMatched"],
            snapshot["afterSnapshotId"],
            snapshot["table"],
        )
        return snapshot


def sensor_variable_key(
    dag_id: str, task_id: str, map_index: int | None, table_uri: str, branch: str = "main"
) -> str:
    """The Variable that remembers what a sensor task last matched on a table (and branch)."""
    map_index = -1 if map_index is None else map_index
    scope = f"{dag_id}\0{task_id}\0{map_index}\0{table_uri}" + ("" if branch == "main" else f"\0{branch}")
    digest = hashlib.sha256(scope.encode("utf-8")).hexdigest()[:16]
    readable = f"{dag_id}.{task_id}" + (f".{map_index}" if map_index >= 0 else "")
    # Variable keys hold at most 250 characters; the digest keeps a truncated key unique.
    return f"{VARIABLE_PREFIX}.{readable[: 250 - len(VARIABLE_PREFIX) - 18]}.{digest}"
