"""Test DAG: one ``LakeformatWriteOperator`` whose table, source, overwrite spec and execution come from params."""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_lakeformat.operators.write import LakeformatWriteOperator

with DAG(
    "lakeformat_test_write",
    schedule=None,
    params={"table": "db.t", "source": "", "overwrite": "*", "execution": "local"},
) as write_dag:
    LakeformatWriteOperator(
        task_id="write",
        table="{{ params.table }}",
        source="{{ params.source }}",
        overwrite="{{ params.overwrite }}",
        execution="{{ params.execution }}",
    )
