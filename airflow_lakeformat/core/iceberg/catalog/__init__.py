"""Opening and creating Iceberg tables. Imports only ``metadata``.

* ``catalog``: open a table (a catalog, a Hadoop-layout path, a ``*.metadata.json``), ``detect_format``;
* ``hadoop_catalog``: the committable pyiceberg ``Catalog`` for Hadoop-layout path tables;
* ``table_definition``: a new table's schema, partition spec and properties, checked;
* ``create``: create it in a catalog or at a Hadoop-layout path.
"""
