"""Test support: hypothesis strategies, the tolerance table, check_op and profiles.

Imports hypothesis; only tests and tools import this package.
"""
