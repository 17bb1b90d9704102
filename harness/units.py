"""Byte units, defined once."""
MiB = 1 << 20
GiB = 1 << 30
