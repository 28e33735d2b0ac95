"""``hooks/health_policy.load_policy`` (issue 28 point 3): a health policy held by an Airflow Variable, read
through Airflow's own ``Variable.get``, parsed as YAML or JSON, refused with the Variable and the key path
named.

The Variables here come from the environment (``AIRFLOW_VAR_<NAME>``, Airflow's first secrets backend): outside
a running task the Task SDK's ``Variable.get`` reaches no metadata database, and inside one it asks the API
server for the same name, so the lookup under test is the one a task makes. No database needed (cheap)."""

from __future__ import annotations

import pytest

from airflow_lakeformat.core.errors import PolicyError, UsageError
from airflow_lakeformat.hooks.health_policy import load_policy

pytestmark = pytest.mark.airflow


def test_a_variable_from_the_environment_refusals_and_the_other_sources(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "AIRFLOW_VAR_LAKEFORMAT_HEALTH_POLICY_ENV", '{"tables": {"db.events": {"operations": []}}}'
    )
    policy = load_policy(variable="lakeformat_health_policy_env")
    assert policy is not None and policy.tables["db.events"].operations == ()
    assert policy.source == "Airflow Variable lakeformat_health_policy_env"
    yaml_text = (
        "namespaces:\n  db:\n    thresholds: {min-small-files: 3}\n    operations: [expire_snapshots]\n"
    )
    monkeypatch.setenv("AIRFLOW_VAR_LAKEFORMAT_HEALTH_POLICY_YAML", yaml_text)
    from_yaml = load_policy(variable="lakeformat_health_policy_yaml")
    assert from_yaml is not None and from_yaml.namespaces["db"].thresholds == {"min-small-files": 3}
    assert from_yaml.namespaces["db"].operations == ("expire_snapshots",)

    monkeypatch.setenv(
        "AIRFLOW_VAR_LAKEFORMAT_HEALTH_POLICY_BAD", "defaults:\n  thresholds: {min-small-file: 2}\n"
    )
    with pytest.raises(
        PolicyError,
        match=r"Airflow Variable lakeformat_health_policy_bad: /defaults/thresholds/min-small-file: unknown threshold",
    ):
        load_policy(variable="lakeformat_health_policy_bad")
    with pytest.raises(PolicyError, match="Airflow Variable lakeformat_no_such_policy: no such Variable"):
        load_policy(variable="lakeformat_no_such_policy")
    with pytest.raises(UsageError, match="not both"):
        load_policy({"defaults": {}}, variable="lakeformat_health_policy_env")
    assert load_policy() is None
    assert load_policy({"defaults": {"operations": ["compact_data"]}}).defaults.operations == (
        "compact_data",
    )
