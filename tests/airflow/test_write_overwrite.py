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
