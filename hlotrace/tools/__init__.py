"""The ``hlotrace`` command-line program (``hlotrace --help``, ``python -m hlotrace``).

Subcommands: ``lower`` (record a function in a Python file and print its StableHLO or
compiled HLO), ``rules`` (op / lowering-rule / property-test coverage of the registries) and
``show`` (print or lower a saved trace). See :mod:`hlotrace.tools.cli`.
"""

from hlotrace.tools.cli import main

__all__ = ["main"]
