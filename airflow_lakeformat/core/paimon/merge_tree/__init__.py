"""Paimon's merge-tree (LSM) compaction of primary-key tables.

One module per concept (the shared contract of issue 27):

* ``kv_schema``: the physical layout of a primary-key data file (``_KEY_*``, ``_SEQUENCE_NUMBER``,
  ``_VALUE_KIND``, then the value columns), Java's ``KeyValue#createKeyValueFields``;
* ``kv_files`` (``kv_read``, ``kv_write``, ``kv_stats``): one live file read as a KV table, and merged KV
  rows written as new files with their exact ``DataFileMeta`` and statistics (``KeyValueDataFileWriter``);
* ``levels``: levels, sorted runs and ``IntervalPartition`` sections of one bucket;
* ``universal``: ``UniversalCompaction``'s pick, the full-compaction pick, the output level, the
  drop-delete rule and the upgrade-vs-rewrite rule of ``MergeTreeCompactTask``;
* ``merge_spec``, ``merge_engines``, ``aggregators``: the merge engines (what one key's records become);
* ``plan``, ``commit``, ``compaction``, ``refusals``: per-bucket plans, the COMPACT commit, the run and
  the table-level refusals.
"""
