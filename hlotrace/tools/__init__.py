"""The ``hlotrace`` command-line program (``hlotrace --help``, ``python -m hlotrace``).

Subcommands: ``lower`` (record a function in a Python file and print its StableHLO or
compiled HLO), ``rules`` (op / lowering-rule / property-test coverage of the registries),
``show`` (print or lower a saved trace, optionally through a pass pipeline), ``passes``
(the passes a pipeline may name) and ``export`` (a portable StableHLO artifact). One module
per command: cli.py (lower, the shared helpers), rules_cmd.py, show_cmd.py, passes_cmd.py,
export_cmd.py.
"""

from hlotrace.tools.cli import main

__all__ = ["main"]
