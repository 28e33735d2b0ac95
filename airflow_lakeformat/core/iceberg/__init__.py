"""Apache Iceberg support of the core: open, read and commit Iceberg tables through pyiceberg 0.12.

Imports neither airflow, pyspark nor the Paimon modules of the core; only the format-neutral
``core.io``, ``core.errors`` and ``core.progress``. Modules, one concept each:

* ``catalog``: open a table (catalog, Hadoop-layout path, ``*.metadata.json``), ``detect_format``;
* ``hadoop_catalog``: the committable pyiceberg ``Catalog`` for Hadoop-layout path tables;
* ``metadata_files``: metadata JSON decode/encode, Hadoop version files and hint;
* ``table``: the ``IcebergTable`` wrapper; ``fileio``: storage options <-> pyiceberg FileIO properties;
* ``manifests``, ``live_files``, ``manifest_decode``, ``partition_values``: reading manifests;
* ``snapshots``, ``files``, ``inspect``, ``split_offsets``: the JSON documents;
* ``commit`` (the retry loop) and ``write`` (append, add_files);
* ``table_definition`` (a new table's schema, partition spec and properties, checked) and ``create``
  (create it in a catalog or at a Hadoop-layout path);
* ``manifest_compaction`` (plan, commit a ``replace`` snapshot), ``manifest_rewrite`` (full: Java's
  ``RewriteManifests``), ``manifest_merge`` (minor: ``ManifestMergeManager``), ``manifest_writer``;
* ``orphans`` (Java's ``DeleteOrphanFilesSparkAction``: plan, execute, audit report), ``orphan_listing``
  (roots, ``<root>/`` boundary, hidden paths), ``orphan_valid`` (the valid set), ``location`` (Java's
  ``FileURI`` normalisation).

Submodules are imported on use (``from airflow_lakeformat.core.iceberg.catalog import open_table``), so
importing the package loads nothing heavy.
"""
