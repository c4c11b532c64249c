"""``save``/``load``: state dicts (nested dicts, lists, arrays, scalars) in one ``.npz`` file.

Never pickles: arrays go into the archive as plain ``.npy`` entries, everything else
(nesting, dict keys, Python scalars and strings, dtype notes) into one JSON document stored
beside them, and the file is read back with ``allow_pickle=False``. ``bfloat16`` (and the
other ``ml_dtypes`` types NumPy cannot name in a ``.npy`` header) is stored as its bits in
an unsigned integer of the same width, with the dtype noted in the JSON.

>>> import hlotrace as ht
>>> ht.save({"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 3}, "ckpt.npz")
>>> ckpt = ht.load("ckpt.npz")
>>> model.load_state_dict(ckpt["model"]); opt.load_state_dict(ckpt["optim"])

Arrays come back as read-write NumPy arrays (Tensors are saved as their values). A ``.npz``
written by ``np.savez`` loads as a flat ``{name: array}`` dict. Array entry names follow the
nesting (``model/fc1.weight``), so the file is readable with ``np.load`` too.
"""

from __future__ import annotations

import json
import os
import zipfile

import ml_dtypes
import numpy as np

from hlotrace.errors import HlotraceError, argument_error
from hlotrace.tensor import Tensor

META_KEY = "__hlotrace_meta__"
FORMAT = "hlotrace.save"
VERSION = 1

_PLAIN_KINDS = "biuf"  # bool, signed, unsigned, float: what a .npy header names without pickle


def _is_ml_dtype(dtype: np.dtype) -> bool:
    return dtype.type.__module__.split(".")[0] == "ml_dtypes"


def _encode_array(array: np.ndarray, where: str) -> tuple[np.ndarray, str | None]:
    if array.dtype.kind in _PLAIN_KINDS and not _is_ml_dtype(array.dtype):
        return array, None
    if _is_ml_dtype(array.dtype) and hasattr(ml_dtypes, array.dtype.name):
        bits = np.dtype(f"uint{8 * array.dtype.itemsize}")
        return array.view(bits), array.dtype.name
    raise HlotraceError(
        f"save: {where} is an array of dtype {array.dtype}, which cannot be stored without pickle "
        f"(numeric and bool arrays only)"
    )


def _decode_array(array: np.ndarray, dtype_name: str | None, where: str) -> np.ndarray:
    if dtype_name is None:
        return array
    dtype = getattr(ml_dtypes, dtype_name, None)
    if dtype is None or np.dtype(dtype).itemsize != array.dtype.itemsize:
        raise HlotraceError(f"load: {where} is noted as dtype {dtype_name!r}, which this installation cannot read")
    return array.view(dtype)


def save(obj, path: str | os.PathLike) -> None:
    """Write ``obj`` (a state dict, or nested dicts/lists/tuples of them) to ``path``.

    Leaves may be NumPy arrays, Tensors, Python/NumPy scalars, strings or None. Dict keys
    must be strings or ints. ``path`` is written as given (no ``.npz`` is appended), through
    a temporary file, so a failed save leaves an existing file intact.
    """
    arrays: dict[str, np.ndarray] = {}

    def entry_name(path_parts: list[str]) -> str:
        base = "/".join(path_parts) or "value"
        name, n = base, 1
        while name in arrays or name == META_KEY:
            name, n = f"{base}#{n}", n + 1
        return name

    def encode(value, parts: list[str]):
        where = "/".join(parts) or "the value"
        if isinstance(value, Tensor):
            value = value.numpy()
        if isinstance(value, np.ndarray | np.generic) and not isinstance(value, np.str_ | np.bytes_):
            array, note = _encode_array(np.asarray(value), where)
            name = entry_name(parts)
            arrays[name] = array
            node = {"array": name}
            if note is not None:
                node["dtype"] = note
            if isinstance(value, np.generic):
                node["scalar"] = True
            return node
        if value is None or isinstance(value, bool | int | float | str):
            return {"value": value}
        if isinstance(value, dict):
            items = []
            for k, v in value.items():
                if isinstance(k, bool) or not isinstance(k, str | int):
                    raise HlotraceError(
                        f"save: {where} has a key {k!r} of type {type(k).__name__}; keys are str or int"
                    )
                items.append([k, encode(v, [*parts, str(k)])])
            return {"dict": items}
        if isinstance(value, list | tuple):
            kind = "list" if isinstance(value, list) else "tuple"
            return {kind: [encode(v, [*parts, str(i)]) for i, v in enumerate(value)]}
        raise HlotraceError(f"save: {where} is a {type(value).__name__}, which save() does not store (never pickled)")

    path = _writable_path(path)
    tree = encode(obj, [])
    meta = json.dumps({"format": FORMAT, "version": VERSION, "tree": tree})
    arrays[META_KEY] = np.frombuffer(meta.encode("utf-8"), dtype=np.uint8)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with _opened_for_writing(tmp, path) as f:
            np.savez(f, allow_pickle=False, **arrays)
            # On disk before the rename: a crash right after os.replace must not leave an
            # empty file where the previous checkpoint was.
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _writable_path(path) -> str:
    """``path`` as a string when a file can be created there; else the ArgumentError that
    names it (not the temporary file save writes first)."""
    if not isinstance(path, str | os.PathLike):
        raise argument_error("save", "path", path, "a file path (str or os.PathLike)")
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise argument_error("save", "path", path, "a file path; it names a directory")
    if not os.path.isdir(folder):
        raise argument_error("save", "path", path, f"a file in an existing directory; {folder} does not exist")
    return path


def _opened_for_writing(tmp: str, path: str):
    try:
        return open(tmp, "wb")
    except OSError as exc:
        raise HlotraceError(f"save: cannot write {path}: {exc.strerror or exc}") from None


_CHECKPOINT = "a file hlotrace.save wrote (or an np.savez .npz archive)"


def _read_arrays(path: str) -> dict[str, np.ndarray]:
    """The arrays of the .npz archive at ``path``; one ArgumentError naming ``path`` when it
    is missing, a directory, a .npy array or anything else that is not such an archive."""

    def refuse(why: str):
        return argument_error("load", "path", path, f"{_CHECKPOINT}; {why}")

    if not os.path.exists(path):
        raise refuse("no such file")
    if os.path.isdir(path):
        raise refuse("it is a directory")
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise refuse(f"it cannot be read ({exc.strerror or exc})") from None
    if head.startswith(b"\x93NUMPY"):
        raise refuse("it is a .npy array (np.save): read it with np.load")
    if not zipfile.is_zipfile(path):
        raise refuse(f"it is not a zip archive (it starts with {head!r})")
    with zipfile.ZipFile(path) as archive:
        foreign = [name for name in archive.namelist() if not name.endswith(".npy")]
    if foreign:
        raise refuse(f"its entries {foreign[:3]} are not .npy arrays")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError) as exc:
        # .npy entries holding object arrays (pickles) or damaged ones.
        raise refuse(f"an entry is not a plain .npy array ({type(exc).__name__})") from None


def load(path: str | os.PathLike):
    """Read what :func:`save` wrote (or a plain ``np.savez`` file, as a flat dict)."""
    if not isinstance(path, str | os.PathLike):
        raise argument_error("load", "path", path, "a file path (str or os.PathLike)")
    path = os.fspath(path)
    arrays = _read_arrays(path)
    if META_KEY not in arrays:
        return arrays
    try:
        meta = json.loads(arrays.pop(META_KEY).tobytes().decode("utf-8"))
        if meta.get("format") != FORMAT:
            raise ValueError(f"unknown format {meta.get('format')!r}")
        if meta.get("version", 0) > VERSION:
            raise ValueError(f"written by a newer hlotrace (format version {meta['version']})")
        return _decode(meta["tree"], arrays)
    except (ValueError, KeyError, TypeError) as exc:
        raise HlotraceError(f"load: {path} has a damaged hlotrace index: {exc}") from None


def _decode(node: dict, arrays: dict[str, np.ndarray]):
    if "array" in node:
        name = node["array"]
        array = _decode_array(arrays[name], node.get("dtype"), name)
        return array[()] if node.get("scalar") else array
    if "value" in node:
        return node["value"]
    if "dict" in node:
        return {k: _decode(v, arrays) for k, v in node["dict"]}
    if "list" in node:
        return [_decode(v, arrays) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, arrays) for v in node["tuple"])
    raise ValueError(f"unknown entry {sorted(node)}")


# -- safetensors ---------------------------------------------------------------------------------
#
# The format PyTorch checkpoints are shared in (Hugging Face's ``safetensors``): an 8-byte
# little-endian header length, a JSON header ``{name: {"dtype", "shape", "data_offsets"}}`` and
# the raw little-endian bytes. Read and written through the ``safetensors`` package's NumPy API
# (``pip install safetensors``; no torch needed), which hlotrace's test extra installs.


def _safetensors_numpy():
    try:
        import safetensors.numpy
    except ImportError:  # pragma: no cover - the test extra installs it
        raise HlotraceError(
            "reading or writing .safetensors files needs the safetensors package (pip install safetensors; "
            "it does not need torch)"
        ) from None
    return safetensors.numpy


def save_safetensors(tensors, path: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write a flat ``{name: array or Tensor}`` dict as a ``.safetensors`` file (what
    ``safetensors.torch.save_file`` writes for a PyTorch state dict; readable by PyTorch with
    ``safetensors.torch.load_file``)."""
    path = _writable_path(path)
    arrays = {}
    for name, value in dict(tensors).items():
        if not isinstance(name, str):
            raise HlotraceError(f"save_safetensors: key {name!r} is not a string")
        array = value.numpy() if isinstance(value, Tensor) else np.asarray(value)
        # np.require, not np.ascontiguousarray: the latter makes a 0-d array 1-d (a scalar such
        # as BatchNorm's num_batches_tracked would be written with shape [1], PyTorch's is []).
        arrays[name] = np.require(array, requirements="C")
    _safetensors_numpy().save_file(arrays, path, metadata=metadata)


def load_safetensors(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """``{name: NumPy array}`` of a ``.safetensors`` file (a PyTorch state dict saved with
    ``safetensors.torch.save_file`` reads back with PyTorch's key names and layouts)."""
    if not isinstance(path, str | os.PathLike):
        raise argument_error("load_safetensors", "path", path, "a file path (str or os.PathLike)")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise argument_error("load_safetensors", "path", path, "an existing .safetensors file")
    try:
        loaded = _safetensors_numpy().load_file(path)
    except Exception as exc:  # the package raises its own SafetensorError for a damaged file
        raise HlotraceError(f"load_safetensors: {path} is not a readable safetensors file: {exc}") from None
    return {name: np.array(array, copy=True) for name, array in loaded.items()}
