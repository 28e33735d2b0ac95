"""``LakeformatExpirePartitionsOperator``: Paimon's partition expiry, in the worker.

Drops the partitions older than the expiration time in one OVERWRITE snapshot, as Paimon's ``expire_partitions``
does (``docs/maintenance.md``): by the time in the partition values (``values-time``: ``partition.timestamp-pattern``
and ``partition.timestamp-formatter``) or by the newest file's creation time (``update-time``). The files of the
dropped partitions stay on disk until a snapshot expiry deletes them, so run the expire-snapshots operator after
it (Paimon's own order: partition expiry, then snapshot expiry). Every argument left out falls back to the
table's option. Partitions whose time cannot be read are skipped and listed in the result. It commits as the
connection's commit user (``<commit_user_prefix>-<dag_id>-<task_id>``), holding the table's maintenance lock
(dry runs excepted). An Iceberg table is refused (the option is Paimon's).

Example:
    >>> LakeformatExpirePartitionsOperator(task_id="expire_partitions", table="db.events",
    ...                                    expiration_time="30 d", timestamp_formatter="yyyyMMdd")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from airflow_lakeformat.operators.base import LakeformatMaintenanceOperator
from airflow_lakeformat.operators.templated import as_bool, optional_duration, optional_int

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_lakeformat.operators.base import LakeTable

STRATEGIES = ("values-time", "update-time")


def optional_text(value: str | None) -> str | None:
    """A templated text: None, blank, ``"None"`` or ``"null"`` mean "not set" (the table's option applies)."""
    if value is None:
        return None
    text = str(value).strip()
    return None if text.lower() in ("", "none", "null") else text


class LakeformatExpirePartitionsOperator(LakeformatMaintenanceOperator):
    """Drop the partitions of a Paimon table older than the expiration time (one OVERWRITE snapshot).

    :param expiration_time: expire partitions whose time is before now minus this: a ``timedelta`` or ``"30 d"``
        (default: the table's ``partition.expiration-time``; one of the two is required). Templated.
    :param timestamp_formatter: a Java ``DateTimeFormatter`` pattern such as ``"yyyyMMdd"`` (default:
        ``partition.timestamp-formatter``, else the lenient ``yyyy-M-d[ H:m:s]``). Templated.
    :param timestamp_pattern: how the values make the time text, e.g. ``"$dt $hour:00:00"`` (default:
        ``partition.timestamp-pattern``, else the first partition value). Templated.
    :param strategy: ``"values-time"`` or ``"update-time"`` (default: ``partition.expiration-strategy``,
        values-time). Templated.
    :param max_expires: at most this many partitions per run (default: ``partition.expiration-max-num``, 100).
        Templated.
    :param dry_run: report the partitions, commit nothing (default False). Templated.
    :param skip_unsupported: a table partition expiry does not apply to (an Iceberg table, no partition keys, no
        expiration time given or set as ``partition.expiration-time``, ``metastore.partitioned-table``) skips the
        task instead of failing it, for DAGs that maintain mixed lists of tables. Templated.

    The XCom result is the core's JSON (``operation: expire-partitions``, ``table``, ``format``, ``dryRun``,
    ``partitionsExpired``, ``partitionsSkipped`` with reasons, ``files``, ``bytes``, ``snapshotId``) plus
    ``execution`` (always ``local``).
    """

    template_fields: Sequence[str] = (
        *LakeformatMaintenanceOperator.template_fields,
        "expiration_time",
        "timestamp_formatter",
        "timestamp_pattern",
        "strategy",
        "max_expires",
        "skip_unsupported",
    )
    operation = "expire-partitions"

    def __init__(
        self,
        *,
        expiration_time: timedelta | str | None = None,
        timestamp_formatter: str | None = None,
        timestamp_pattern: str | None = None,
        strategy: str | None = None,
        max_expires: int | str | None = None,
        skip_unsupported: bool | str = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("execution", "local")
        super().__init__(**kwargs)
        self.expiration_time = expiration_time
        self.timestamp_formatter = timestamp_formatter
        self.timestamp_pattern = timestamp_pattern
        self.strategy = strategy
        self.max_expires = max_expires
        self.skip_unsupported = skip_unsupported
        if (
            strategy is not None
            and "{{" not in strategy
            and optional_text(strategy) not in (None, *STRATEGIES)
        ):
            raise ValueError(f"strategy must be values-time or update-time, not {strategy!r}")

    def _settings(self) -> dict[str, Any]:
        """The rendered arguments, checked; those left out are not passed (the table's options apply)."""
        strategy = optional_text(self.strategy)
        if strategy is not None and strategy not in STRATEGIES:
            raise AirflowFailException(f"strategy must be values-time or update-time, not {strategy!r}")
        settings = {
            "expiration_time": optional_duration(self.expiration_time, "expiration_time"),
            "timestamp_formatter": optional_text(self.timestamp_formatter),
            "timestamp_pattern": optional_text(self.timestamp_pattern),
            "strategy": strategy,
            "max_expires": optional_int(self.max_expires, "max_expires"),
        }
        return {name: value for name, value in settings.items() if value is not None}

    def check_table(self, table: LakeTable) -> None:
        self._settings()  # bad arguments fail before the lock is taken

    def run_local(self, context: Context, table: LakeTable) -> dict[str, Any]:
        from airflow_lakeformat.core.errors import MaintenanceRefusedError, UsageError

        try:
            result = table.maintenance.expire_partitions(
                dry_run=self.is_dry_run, commit_user=self.task_commit_user(context), **self._settings()
            )
        except (MaintenanceRefusedError, UsageError) as exc:
            if as_bool(self.skip_unsupported, "skip_unsupported"):
                raise AirflowSkipException(f"skipped: {exc}") from None
            raise
        return dict(result.to_json())
