"""Iceberg table maintenance: snapshot expiry, orphan-file cleanup and manifest compaction. The top room:
imports ``write``, ``reach``, ``catalog`` and ``metadata``. Iceberg data compaction will live here too.

* ``expiry``: Java's ``expire_snapshots`` (plan, commit, delete the files only expired snapshots reached);
  ``expiry_rules`` (options, which snapshots and refs expire), ``expiry_commit`` (the commit and its
  journal), ``expiry_files`` (the files to delete), ``expiry_result`` (plan and result documents);
* ``orphans``: Java's ``DeleteOrphanFilesSparkAction``: execute a plan, audit report, both steps in one
  call; ``orphan_plan`` (guards, listing, join: the plan), ``orphan_listing`` (roots, ``<root>/``
  boundary, hidden paths, object-store listing), ``orphan_local`` (the local name-only listing),
  ``orphan_valid`` (the valid set);
* ``manifest_compaction``: commit a ``replace`` snapshot and return the result;
  ``manifest_compaction_plan`` (the plan), ``manifest_rewrite`` (full: Java's ``RewriteManifests``),
  ``manifest_merge`` (minor: ``ManifestMergeManager``).
"""
