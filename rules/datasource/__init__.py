"""Placement from where the data comes from: snapshot and clone sources (sources, mutation, validation) and
the VM that will use a disk CDI writes (vm)."""
