"""User source locations: the first stack frame outside the hlotrace package."""

from __future__ import annotations

import os
import sys
from typing import NamedTuple

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class SourceLocation(NamedTuple):
    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} (in {self.function})"

    def short(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"


def user_location(skip: int = 1) -> SourceLocation | None:
    """Return the innermost frame that is not hlotrace's own code.

    Example: inside ``F.exp(x)`` called from ``model.py`` line 12 this returns
    ``SourceLocation("…/model.py", 12, "forward")``.
    """
    frame = sys._getframe(skip)
    while frame is not None:
        code = frame.f_code
        if not code.co_filename.startswith(_PACKAGE_DIR):
            # tuple.__new__: what the NamedTuple's __new__ does, without its Python frame (this
            # runs for every eager op: the result's origin).
            return _new(SourceLocation, (code.co_filename, frame.f_lineno, code.co_name))
        frame = frame.f_back
    return None


_new = tuple.__new__
