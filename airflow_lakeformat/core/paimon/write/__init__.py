"""Adding data files to a Paimon append table: registering existing Parquet files, or writing Arrow data.

A file we add must look to Paimon exactly as if Paimon had written it, or readers misbehave silently.
So everything here errs on the side of refusing, or of saying less. Each rule lives in one module, with
the Java classes it follows:

* ``layout``: which tables accept files, and the partition and bucket directory a file must sit in;
* ``parquet_columns``: which Parquet columns Paimon's reader reads as which table column;
* ``value_stats``: the value statistics (``_VALUE_STATS``) a file may claim;
* ``data_file_meta``: a Parquet file's ``DataFileMeta``, from its footer;
* ``bucketing``: fixed-bucket tables, rows hashed as ``DefaultBucketFunction`` does;
* ``live_state``: what the latest snapshot says (live files, sequence numbers, bucket counts);
* ``register``: existing files, checked and described (``register_files``);
* ``rows``, ``parquet_files``, ``data_files``, ``rolling_writer``: Arrow rows cast to the table's types,
  split by partition and bucket and written as new files, all at once (``write_data_files``) or
  streamed in batches (``RollingFileWriter``).

Nothing here commits: every function returns ADD entries for ``commit.Committer``. Paimon types as Arrow
types are in ``core/paimon/arrow_types.py``.
"""
