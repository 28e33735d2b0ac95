"""Apache Iceberg support of the core: open, read, write and maintain Iceberg tables through pyiceberg 0.12.

Imports neither airflow, pyspark nor the Paimon modules of the core; only the format-neutral
``core.io``, ``core.errors``, ``core.progress`` and their kin. The modules live in rooms, one job each;
a room imports only rooms below it (an import-linter ``layers`` contract in ``pyproject.toml`` checks it):

* ``maintenance/``: snapshot expiry, orphan-file cleanup, manifest compaction (and, later, data
  compaction);
* ``write/``: appending data, registering files, the one commit retry loop, writing manifests;
* ``reach/``: the files a set of snapshots reaches (manifest lists, manifests, content and statistics
  files), read fast; what expiry and orphan cleanup build on;
* ``catalog/``: opening a table (catalog, Hadoop-layout path, ``*.metadata.json``), the Hadoop-layout
  catalog, creating a table from its definition;
* ``metadata/``: the ``IcebergTable`` handle, metadata JSON files, fetching and decoding manifest lists
  and manifests, live files, and the JSON documents (snapshots, files, manifests, inspect).

``catalog``, ``reach`` and ``write`` are independent of one another. ``errors`` (the Iceberg-specific
errors and format-version limits) sits beside the rooms and is imported by any of them.

Submodules are imported on use (``from airflow_lakeformat.core.iceberg.catalog.catalog import
open_table``); the package and every room's ``__init__`` import nothing, so importing them loads nothing
heavy.
"""
