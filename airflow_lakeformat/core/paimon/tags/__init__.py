"""Paimon tags: the tag files (``tag_files``), their expiry (``tag_expiry``) and the operations (``manage``).

A tag is ``tag/tag-<name>`` of its branch: the tagged snapshot's JSON, plus ``tagCreateTime`` and
``tagTimeRetained`` when it has a time retention (Java ``TagManager``/``Tag``; reference paimon-format §5).
Automatic names and the retention of automatic tags are format-neutral:
``core/maintenance/tag_periods.py``.
"""
