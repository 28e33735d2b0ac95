"""Table health, the same for both formats: what a table needs, computed from its metadata only.

- ``model.py``: :class:`~airflow_lakeformat.core.health.model.HealthInputs` (what a format's collector reads)
  and :class:`~airflow_lakeformat.core.health.model.TableHealth` (the report, ``to_json()``/``summary()``).
- ``thresholds.py``: the limits, their defaults and the per-table ``lakeformat.health.*`` overrides.
- ``score.py``: the 0-100 score (Amoro's weights: small files 40, delete load 40, position deletes 20).
- ``assess.py``: the measures per table and partition and the recommendations.
- ``policy.py``: health policies (YAML/JSON; defaults -> namespaces -> tables): thresholds and the operations
  allowed over the table's own properties; what a policy does not allow is reported as suppressed.

The collectors are per format: ``core/paimon/maintenance/health.py`` and
``core/iceberg/maintenance/health.py``; the facade's ``table.health()`` (``core/tables.py``) picks one.
"""
