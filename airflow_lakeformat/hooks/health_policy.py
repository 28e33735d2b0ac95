"""Health policies for the Airflow layer: from a path, YAML/JSON text, a mapping, or an Airflow Variable.

``load_policy`` is what the health operator, sensor and the auto-maintenance DAG call: a ``policy`` argument
is read by ``core/health/policy.HealthPolicy.load`` (a ``.yaml``/``.yml``/``.json`` path, the text itself, or a
mapping, e.g. a DAG param); a ``variable`` names an Airflow Variable whose value is the policy's YAML or JSON
text (``Variable.get``, read when the task runs, never at parse time). The policy document, its inheritance
(defaults, namespaces, tables) and its refusals are the core's (``core/health/policy.py``); this module only
fetches the text. A Variable's value is always parsed as a document, never taken as a file path.

Example:
    >>> load_policy(variable="lakeformat_health_policy")  # doctest: +SKIP
    HealthPolicy('Airflow Variable lakeformat_health_policy', namespaces=['db'], tables=[])
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from airflow_lakeformat.core.errors import PolicyError, UsageError
from airflow_lakeformat.core.health.policy import HealthPolicy, parse_policy_text


def load_policy(
    policy: str | os.PathLike[str] | Mapping[str, Any] | None = None, *, variable: str | None = None
) -> HealthPolicy | None:
    """The health policy given, or None when neither argument is.

    Args:
        policy: a policy file's path, its YAML/JSON text, or a mapping.
        variable: the name of an Airflow Variable holding the policy's YAML or JSON text (or a JSON value
            Airflow already deserialised to a mapping).

    Raises:
        UsageError: both arguments given.
        PolicyError: no such Variable, or the policy is invalid (the key path named).

    Example:
        >>> load_policy({"defaults": {"operations": ["expire_snapshots"]}}).defaults.operations
        ('expire_snapshots',)
    """
    if policy is not None and variable is not None:
        raise UsageError("give a health policy or the Airflow Variable that holds one, not both")
    if variable is not None:
        return policy_from_variable(variable)
    if policy is None:
        return None
    return HealthPolicy.load(policy)


def policy_from_variable(name: str) -> HealthPolicy:
    """The policy an Airflow Variable holds (its value parsed as YAML or JSON).

    Raises:
        PolicyError: no such Variable, or an invalid policy.
    """
    from airflow.sdk import Variable

    source = f"Airflow Variable {name}"
    value: Any = Variable.get(name, default=None)
    if value is None:
        raise PolicyError(source, "no such Variable")
    if isinstance(value, Mapping):
        return HealthPolicy.from_mapping(value, source)
    return HealthPolicy.from_mapping(parse_policy_text(str(value), source), source)
