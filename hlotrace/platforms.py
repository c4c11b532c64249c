"""Which platforms this installation can compile for, checked when a function is decorated
(``xla_trace(platform=...)``, ``partial_trace``): found without loading jaxlib or a GPU
driver, so a wrong name fails at the decorator's line rather than at the first call."""

from __future__ import annotations

from hlotrace.errors import argument_error

# Modules and entry points through which jax finds a CUDA PJRT plugin (jax[cuda12] and later).
_CUDA_PLUGIN_MODULES = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_plugins.xla_cuda12", "jax_plugins.xla_cuda13")


def cuda_plugin_installed() -> bool:
    """Whether the installed jax/jaxlib can provide the CUDA platform at all (its PJRT plugin
    package is installed), found without loading jaxlib or a GPU driver."""
    import importlib.util
    from importlib.metadata import entry_points

    from hlotrace.runtime.client import CLIENTS  # lazy: loads the runtime layer

    if "cuda" in CLIENTS:
        return True
    for name in _CUDA_PLUGIN_MODULES:
        try:
            if importlib.util.find_spec(name) is not None:
                return True
        except (ImportError, ValueError):
            continue
    return any("cuda" in entry.name for entry in entry_points(group="jax_plugins"))


def check_platform(api: str, platform):
    """``platform`` when this installation can compile for it: None (the default), ``"cpu"``,
    ``"cuda"``/``"gpu"`` when a CUDA PJRT plugin is installed, or a PJRT plugin registered
    (``hlotrace.runtime.register_plugin`` or $HLOTRACE_PJRT_PLUGIN) before decorating; else
    the ArgumentError naming it, at decoration rather than at the first call."""
    if platform is None or platform == "cpu":
        return platform
    expected = "'cpu', 'cuda' (or 'gpu') or the name of a registered PJRT plugin"
    if not isinstance(platform, str):
        raise argument_error(api, "platform", platform, expected)
    if platform in ("cuda", "gpu"):
        if cuda_plugin_installed():
            return platform
        raise argument_error(
            api,
            "platform",
            platform,
            f"{expected}; this jax/jaxlib has no CUDA PJRT plugin (pip install 'jax[cuda12]'), only 'cpu'",
        )
    import hlotrace.runtime.plugins as plugins  # lazy: loads the runtime layer

    if plugins.plugin_path(platform) is not None:
        return platform
    why = "no PJRT plugin of that name is registered"
    if platform.lower() in ("tpu", "rocm", "metal", "neuron"):
        why = f"the installed jaxlib cannot provide {platform!r} (hlotrace runs on 'cpu' and 'cuda'); {why}"
    raise argument_error(
        api,
        "platform",
        platform,
        f"{expected} (hlotrace.runtime.register_plugin(name, path) or $HLOTRACE_PJRT_PLUGIN first); {why}",
    )
