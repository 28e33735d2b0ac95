"""Reading an Iceberg table's metadata: the table handle, metadata files, manifest lists and manifests, and
the JSON documents made from them. The lowest room: it imports no other room.

* ``table``: the ``IcebergTable`` handle every room works on (pyiceberg table, metadata, FileIO);
* ``metadata_files``: metadata JSON decode/encode, Hadoop version files and the version hint;
* ``fileio``: storage options <-> pyiceberg FileIO properties;
* ``location``: Java's ``FileURI`` normalisation of paths, and the valid-location set;
* ``fetch``: one manifest list's or manifest's bytes, length-checked (every reader uses it);
* ``avro_guard``: the Avro container checks and the checked FileIO (pyiceberg 0.12 overreads);
* ``manifests``: reading a snapshot's manifest list;
* ``entries``: :class:`LiveFile` (a live manifest entry), status and content codes, sequence-number
  inheritance;
* ``live_files``: a snapshot's live files, manifests fetched in parallel, pluggable decoder;
* ``manifest_decode``: the fast decoder (fastavro, reader schema projected by field id);
* ``partition_values``, ``split_offsets``: rendering partition values, checking ``split_offsets``;
* ``snapshots``, ``files``, ``inspect``: the JSON documents of the CLI and the hook.
"""
