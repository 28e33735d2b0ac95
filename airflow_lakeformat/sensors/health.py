"""``LakeformatHealthSensor``: wait until a Paimon or an Iceberg table's health crosses a threshold.

Each poke computes ``table.health()`` (metadata only) and evaluates the conditions with the rule the trigger
uses (``triggers/health_watch.py``'s :class:`HealthRule`): e.g. ``{"smallFiles": 500}`` (at least 500 small
data files), ``{"score_below": 60}``, ``{"operations": ["compact_data"]}`` (health recommends a compaction).
``deferrable=True`` hands the wait to ``LakeformatHealthTrigger`` in the triggerer (``fire_once``), after one
look in the worker. The match goes to XCom: the crossed conditions with their values, the recommended
operations, a one-line summary and the health document without its per-partition rows
(:class:`~airflow_lakeformat.triggers.health_watch.HealthMatch`). Table problems (a missing table, corrupt
metadata, bad connection settings) fail the task without retry; the conditions are checked when the DAG is
parsed.

Example:
    >>> LakeformatHealthSensor(task_id="needs_compaction", table="analytics.events",
    ...                        conditions={"smallFiles": 500}, deferrable=True, poke_interval=600)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.configuration import conf
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_lakeformat.core.errors import LakeformatError
from airflow_lakeformat.hooks.lakeformat import DEFAULT_CONN_ID, LakeformatHook
from airflow_lakeformat.triggers.health_watch import HealthRule

if TYPE_CHECKING:
    from airflow.sdk import Context


class LakeformatHealthSensor(BaseSensorOperator):
    """Wait until the table's health matches ``conditions``; XCom gets the match.

    :param table: the table (full URI, ``db.table`` under the connection's warehouse, or ``namespace.table``
        of the connection's Iceberg catalog). Templated.
    :param conditions: e.g. ``{"smallFiles": 500}`` (``triggers/health_watch.py``); validated here.
    :param conn_id: the ``lakeformat`` connection (``lakeformat_conn_id`` is accepted too). Templated.
    :param require: ``"any"`` crossed condition is enough (default), or ``"all"`` of them.
    :param table_format: ``"paimon"``, ``"iceberg"`` or None (the connection's, else detected). Templated.
    :param deferrable: hand the wait to the triggerer instead of holding a worker slot.
    :param poke_interval: seconds between health computations, in the worker and in the triggerer.
    :param check_before_defer: look once in the worker before deferring (a match then needs no trigger).
    :param policy: a health policy (a YAML/JSON file's path, its text, or a mapping; ``hooks/health_policy.py``)
        that the table is assessed with, as the health operator does: its thresholds and allowed operations
        decide the score and the recommendations an ``operations`` condition watches. Read in the worker when
        the task runs and handed to the trigger as a document. None: the table's properties and the defaults.
    :param policy_variable: the name of an Airflow Variable holding such a policy (YAML or JSON). Templated.
    """

    template_fields: Sequence[str] = ("table", "conn_id", "table_format", "policy_variable")
    ui_color = "#e8f3d6"

    def __init__(
        self,
        *,
        table: str,
        conditions: Mapping[str, Any],
        conn_id: str | None = None,
        lakeformat_conn_id: str | None = None,
        require: str = "any",
        table_format: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        check_before_defer: bool = True,
        policy: str | Mapping[str, Any] | None = None,
        policy_variable: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.rule = HealthRule(conditions, require)  # a bad condition fails the DAG's parse, naming the key
        self.policy = policy
        self.policy_variable = policy_variable
        self._policy_loaded = False
        self.table = table
        self.conditions = dict(conditions)
        self.conn_id = conn_id or lakeformat_conn_id or DEFAULT_CONN_ID
        self.require = require
        self.table_format = table_format
        self.deferrable = deferrable
        self.check_before_defer = check_before_defer
        self._table: Any = None

    @cached_property
    def hook(self) -> LakeformatHook:
        return LakeformatHook(self.conn_id)

    def _load_policy(self) -> None:
        """Read the policy once, in the worker (a bad one fails the task, naming the key)."""
        if self._policy_loaded:
            return
        from airflow_lakeformat.hooks.health_policy import load_policy

        policy = self.policy if self.policy not in (None, "", "None") else None
        variable = self.policy_variable if self.policy_variable not in (None, "", "None") else None
        try:
            self.rule.policy = load_policy(policy, variable=variable)
        except LakeformatError as exc:
            raise AirflowFailException(str(exc)) from None
        self._policy_loaded = True

    def _check(self) -> dict[str, Any] | None:
        """One health computation: the match's JSON, or None. Table problems fail the task."""
        from airflow_lakeformat.triggers.watch import describe_error, is_permanent

        self._load_policy()
        try:
            if self._table is None:
                self._table = self.hook.open_lake_table(self.table, self.table_format)
            match = self.rule.poll(self._table)
        except Exception as exc:
            if is_permanent(exc):
                raise AirflowFailException(describe_error(exc)) from None
            raise
        return None if match is None else match.to_json()

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        if self.check_before_defer:
            match = self._check()
            if match is not None:
                return self._finish(match)
        from airflow_lakeformat.triggers.health import LakeformatHealthTrigger, policy_kwargs

        self._load_policy()
        self.defer(
            trigger=LakeformatHealthTrigger(
                table=self.table,
                conditions=self.conditions,
                lakeformat_conn_id=self.conn_id,
                require=self.require,
                poll_interval=self.poke_interval,
                table_format=self.table_format,
                fire_once=True,
                **policy_kwargs(self.rule.policy),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def poke(self, context: Context) -> bool | PokeReturnValue:
        match = self._check()
        if match is None:
            return False
        return PokeReturnValue(is_done=True, xcom_value=self._finish(match))

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        """Resume after the trigger fired: the match (returned, so it goes to XCom), or a failure."""
        if not isinstance(event, dict) or event.get("status") not in ("success", "error"):
            raise AirflowException(f"unexpected event from LakeformatHealthTrigger: {event!r}")
        if event["status"] == "error":
            raise AirflowFailException(str(event.get("message")))
        return self._finish(event["match"])

    def _finish(self, match: dict[str, Any]) -> dict[str, Any]:
        crossed = ", ".join(f"{c['condition']} ({c['metric']} = {c['value']})" for c in match["crossed"])
        self.log.info("%s crossed: %s. %s", match["table"], crossed, match["summary"])
        return match
