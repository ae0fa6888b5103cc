"""The fuzz suite's hypothesis profiles (tests/fuzz/profiles.py), loaded before any test module."""

from tests.fuzz import profiles  # noqa: F401
