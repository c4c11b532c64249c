"""``python -m hlotrace``: the same program as the ``hlotrace`` console script."""

from hlotrace.tools.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
