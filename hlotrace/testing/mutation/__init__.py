"""Mutation testing of the lowering rules: do the tests catch the mistakes rule authors make?

Each mutant in ``tests/mutants/<family>.py`` replaces one exact piece of code (it must occur
exactly once in its file) with a realistic wrong version. ``python -m hlotrace.testing.mutation``
(``make mutation``) applies the mutants one at a time to scratch copies of the repository,
runs every column's tests against each and prints which test killed it. See TESTING.md.

This package only spawns subprocesses: importing it loads neither jax nor hypothesis.
"""

from hlotrace.testing.mutation.catalog import CatalogError, Mutant, load_catalog
from hlotrace.testing.mutation.runner import COLUMNS, Column, register_column

__all__ = ["COLUMNS", "CatalogError", "Column", "Mutant", "load_catalog", "register_column"]
