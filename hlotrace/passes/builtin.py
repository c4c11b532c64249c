"""hlotrace's own passes: importing this module registers them, as importing ``hlotrace.ops``
registers the op families.

The manager imports it on the first pipeline it parses rather than ``hlotrace.passes``
importing it: the passes load jaxlib's MLIR bindings, which ``import hlotrace`` does not.
tests/passes/test_builtin_passes.py checks that every module here that registers a pass is
imported below.
"""

from hlotrace.passes import fuse_elementwise, fuse_reductions, layout, remat, simplify  # noqa: F401
