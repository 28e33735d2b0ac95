"""Committing to Iceberg tables. Imports only ``metadata``.

* ``commit``: the one retry loop every commit goes through (``commit_with_retry``, ``RetryPolicy``);
* ``write``: append Arrow data, register existing data files (``add_files``);
* ``manifest_writer``: reading manifest entries back and writing manifests (rolling, to a store or to
  memory), used by manifest compaction.
"""
