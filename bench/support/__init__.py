"""What the benchmarks share (issue 25: one helper package, imported as ``bench.support``, no cycle).

- ``runs``: paths, worker subprocesses (``run_json``), the machine's facts and load average.
- ``memory``: RSS, the high-water mark around a call; ``tree_memory``: sampled PSS of a process tree.
- ``paimon_history``: a Paimon table with a realistic history through the core's commit path.
- ``orphan_table``: the orphan benchmarks' table, planting, and raw floors (walk, used set);
  ``iceberg_orphan_table``: the Iceberg orphan benchmark's table.
- ``commit_tables``, ``planning_table``: the commit and planning benchmarks' tables and raw floors.
- ``access``: file-access counting, hard-linked copies; ``spark``: ``spark-submit`` of a job, generated rows.
- ``pypaimon_table``: the table pypaimon itself writes (planning benchmarks).

Benchmarks import from here; nothing here imports a benchmark.
"""
