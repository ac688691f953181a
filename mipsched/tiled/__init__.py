"""Tiled multi-core accelerators (SET, ISCA'23): RA-tree schedules and their model."""
