"""PJRT plugins: any PJRT C-API plugin library used like the CPU and CUDA clients.

``HLOTRACE_PLATFORM=NAME`` with ``HLOTRACE_PJRT_PLUGIN=/path/libNAME.so`` (read when the
client is first asked for), or ``hlotrace.runtime.register_plugin(NAME, PATH)`` before the
first computation. The library is loaded and initialized through jaxlib's own plugin loader
and gives a client whose devices hlotrace compiles for and runs on; a missing, unreadable or
broken library is one ``BackendError`` naming its path.
"""

from __future__ import annotations

import os

from hlotrace import config
from hlotrace.errors import BackendError

PLUGIN_ENV = "HLOTRACE_PJRT_PLUGIN"
BUILT_IN = ("cpu", "cuda", "gpu")
_PLUGINS: dict[str, str] = {}  # platform name -> library path


def register_plugin(name: str, path: str | os.PathLike) -> None:
    """Use the PJRT plugin library at ``path`` for platform ``name`` (e.g. ``"myaccel"``)."""
    name = str(name).strip().lower()
    path = os.path.abspath(os.fspath(path))
    if not name or name in BUILT_IN:
        raise BackendError(f"register_plugin: {name!r} is a built-in platform name; choose another for the plugin")
    if not os.path.isfile(path):
        raise BackendError(f"PJRT plugin {name!r}: no such library file: {path}")
    known = _PLUGINS.get(name)
    if known is not None and known != path:
        raise BackendError(f"PJRT plugin {name!r} is already registered from {known}, not {path}")
    _PLUGINS[name] = path


def plugin_path(name: str) -> str | None:
    """The library of platform ``name``: registered, or named by $HLOTRACE_PJRT_PLUGIN."""
    if name not in _PLUGINS and (path := config.get(PLUGIN_ENV)):
        register_plugin(name, path)
    return _PLUGINS.get(name)


def load(name: str, path: str):
    """A client of the plugin at ``path``; every failure is a BackendError naming ``path``."""
    import hlotrace.runtime.jaxlib_compat as jaxlib_compat  # lazy: loads jax

    try:
        return jaxlib_compat.plugin_client(name, path)
    except Exception as exc:  # jaxlib reports loader failures as JaxRuntimeError/RuntimeError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BackendError(f"PJRT plugin {name!r} from {path} could not be loaded: {first}") from None
