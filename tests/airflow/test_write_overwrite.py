"""The write operator overwrites a partition by value, in the worker and through the Spark ``write`` job.

The user's report (issue 15): ``p=__DEFAULT_PARTITION__`` must replace the rows whose ``p`` is NULL and
keep the ``''`` and ``' '`` rows that share the default partition's directory, as pypaimon's own overwrite
of an identical table does. The Spark run receives the spec in its exact text form (a JSON object when
the values need one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.airflow.helpers import load_dag_module, task_states, xcom_result
from tests.interop.test_overwrite_interop import by_id, expected, parquet_rows, seeded_table
from tests.support.pypaimon import oracle_append, oracle_read

pytestmark = [pytest.mark.airflow, pytest.mark.interop, pytest.mark.usefixtures("airflow_db")]


@pytest.mark.parametrize(
    ("execution", "spec", "theirs", "value"),
    [
        ("local", "p=__DEFAULT_PARTITION__", {"p": "__DEFAULT_PARTITION__"}, None),
        ("local", '{"p": " "}', {"p": " "}, " "),
        pytest.param("spark", '{"p": null}', {"p": None}, None, marks=[pytest.mark.spark, pytest.mark.slow]),
    ],
)
def test_write_operator_overwrites_by_value_like_pypaimon(
    warehouse: Path, tmp_path: Path, execution: str, spec: str, theirs: dict[str, Any], value: str | None
) -> None:
    new = {"id": 5, "p": value}
    peer = seeded_table(tmp_path / "peer")
    oracle_append(peer, [new], overwrite=theirs)
    ours = seeded_table(warehouse / "db.db" / "t")
    source = parquet_rows(tmp_path / "new.parquet", [new])
    module = load_dag_module("lakeformat_test_write")

    run = module.write_dag.test(
        run_conf={"table": "db.t", "source": str(source), "overwrite": spec, "execution": execution}
    )

    assert task_states(run) == {"write": ("success", 1)}
    result = xcom_result(run, "write")
    assert (result["execution"], result["commitKind"], result["filesWritten"]) == (execution, "OVERWRITE", 1)
    # pypaimon wrote one file per partition value: exactly the overwritten value's file goes.
    assert result["filesDeleted"] == 1
    assert by_id(oracle_read(ours)) == by_id(oracle_read(peer)) == expected(value, new)


@pytest.mark.parametrize("table_format", ["paimon", "iceberg"])
def test_write_operator_stores_the_values_it_is_given(
    warehouse: Path, tmp_path: Path, table_format: str
) -> None:
    """Issue 23 through the operator: a JSON-lines and a CSV row whose STRING ``dt`` looks like a date and whose
    ``code`` is ``007`` are stored as written, in partitions ``dt=2026-11-29`` and ``dt=2026-11-30``."""
    from tests.unit.test_cli_write_values import make_table, stored_rows, user_inputs

    root = make_table(tmp_path, table_format)
    module = load_dag_module("lakeformat_test_write")
    for source in user_inputs(tmp_path):
        run = module.write_dag.test(
            run_conf={"table": root, "source": str(source), "overwrite": "", "execution": "local"}
        )
        assert task_states(run) == {"write": ("success", 1)}
        assert xcom_result(run, "write")["rowsWritten"] == 1
    rows = stored_rows(root)
    assert {d: [(r["dt"], r["id"], r["code"]) for r in rs] for d, rs in rows.items()} == {
        "dt=2026-11-29": [("2026-11-29", 1, "007")],
        "dt=2026-11-30": [("2026-11-30", 2, "007")],
    }
