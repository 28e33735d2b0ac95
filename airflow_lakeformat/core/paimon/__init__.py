"""Apache Paimon: its metadata read and written byte-compatibly by our own code (fastavro, pyarrow, fsspec).

Models and codecs (``types``, ``values``, ``binary_row``, ``schema``, ``snapshot``, ``manifest``, ``avro``,
``arrow_types``), layout (``paths``, ``options``), reading (``table``, ``snapshot_manager``, ``live_files``,
``summary``), writing (``commit``: the publish protocol and its one retry loop; ``manifest_writer``,
``manifest_merge``, ``create``, ``written_files``), ``write/`` (adding data files: registering existing
Parquet files, writing Arrow data as new ones) and ``maintenance/`` (expiry, orphans, manifest and data
compaction, references). Imports neither airflow, pyspark nor the Iceberg package; shares only the neutral
core (``io``, ``errors``, ``units``, ``progress``, ``maintenance/{deletion,lock,results}``).
"""
