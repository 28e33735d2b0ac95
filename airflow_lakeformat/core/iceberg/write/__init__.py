"""Committing to Iceberg tables. Imports only ``metadata``.

* ``commit``: the one retry loop every commit goes through (``commit_with_retry``, ``RetryPolicy``);
* ``write``: append Arrow data, overwrite partitions with it (dynamic or by a filter), register existing data
  files (``add_files``);
* ``partitioned``: Arrow rows partitioned by the current spec's transforms and written as data files;
* ``overwrite``, ``overwrite_scope``: the ``overwrite`` snapshot, what it replaces, its validation;
* ``replace``: the pieces of a snapshot that removes files (manifests rewritten, added manifest, the commit);
* ``manifest_writer``: reading manifest entries back and writing manifests (rolling, to a store or to
  memory), used by manifest compaction.
"""
