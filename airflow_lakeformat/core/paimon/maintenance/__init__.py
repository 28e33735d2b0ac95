"""Paimon maintenance: plan as a value, then execute (deleting only through ``core/maintenance/deletion.py``)."""
