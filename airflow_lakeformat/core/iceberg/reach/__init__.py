"""The files a set of Iceberg snapshots reaches, read fast: what expiry and orphan cleanup build on.
Imports only ``metadata``.

* ``reachability``: :func:`reachable_files` and the per-run ``ReachabilityReader`` (the walk over
  snapshots, the distributed unit of work);
* ``reach_decode``: decoding the few fields reachability needs from manifest lists and manifests;
* ``reach_frames``: the Avro block framing those decoders scan;
* ``reach_lists``: manifest lists of fast appends decoded against their parent's;
* ``reach_result``: the result type (``ReachableFiles``) and the statistics files;
* ``reach_split``: the halves of a read split over two processes (``core/forked.py``).
"""
