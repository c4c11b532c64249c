"""PyTorch checkpoints (hlotrace.nn.load_torch_state_dict, torch_state_dict) and the safetensors
reader/writer: files written here with PyTorch's key names (the safetensors package's NumPy API,
or the format's bytes written out by hand), loaded into hlotrace modules."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
import safetensors.numpy

import hlotrace as ht
from hlotrace import nn
from hlotrace.errors import HlotraceError
from hlotrace.serialization import load_safetensors, save_safetensors


class Net(nn.Module):
    """Conv + BatchNorm + a tied embedding / head: the three cases PyTorch's keys raise."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(3)
        self.emb = nn.Embedding(5, 3)
        self.head = nn.Linear(3, 5, bias=False)
        self.head.weight = self.emb.weight


def _torch_keys_checkpoint(rng) -> dict[str, np.ndarray]:
    """What ``safetensors.torch.save_file(torch_net.state_dict(), path)`` would hold."""
    emb = rng.standard_normal((5, 3)).astype(np.float32)
    return {
        "conv.weight": rng.standard_normal((3, 2, 3, 3)).astype(np.float32),
        "bn.weight": rng.random(3).astype(np.float32),
        "bn.bias": rng.random(3).astype(np.float32),
        "bn.running_mean": rng.random(3).astype(np.float32),
        "bn.running_var": rng.random(3).astype(np.float32) + 0.5,
        "bn.num_batches_tracked": np.array(7, np.int64),
        "emb.weight": emb,
        "head.weight": emb.copy(),
    }


def test_a_pytorch_checkpoint_file_loads_with_tied_weights_and_batch_counters(tmp_path):
    checkpoint = _torch_keys_checkpoint(np.random.default_rng(0))
    path = tmp_path / "net.safetensors"
    safetensors.numpy.save_file(checkpoint, str(path))
    net = Net()
    head = net.head.weight
    result = nn.load_torch_state_dict(net, path)
    assert result == nn.IncompatibleKeys([], [])
    assert net.head.weight is head is net.emb.weight  # loaded in place, still tied
    assert int(net.bn.num_batches_tracked.numpy()) == 7 and net.bn.num_batches_tracked.dtype == np.int64
    exported = nn.torch_state_dict(net)
    assert list(exported) == list(checkpoint)  # PyTorch's keys in PyTorch's order
    for key, value in checkpoint.items():
        np.testing.assert_array_equal(exported[key], value, err_msg=key)
        assert exported[key].dtype == value.dtype, key
    # written back as PyTorch writes it, the file loads again, counter included (int64, shape ())
    safetensors.numpy.save_file(exported, str(tmp_path / "out.safetensors"))
    other = Net()
    assert nn.load_torch_state_dict(other, tmp_path / "out.safetensors") == nn.IncompatibleKeys([], [])
    assert other.bn.num_batches_tracked.numpy().shape == () and int(other.bn.num_batches_tracked.numpy()) == 7
    # state_dict() itself: each tensor once, in PyTorch's order (module by module)
    assert list(net.state_dict()) == [k for k in checkpoint if k != "head.weight"]


def test_load_casts_floats_and_reports_keys():
    checkpoint = _torch_keys_checkpoint(np.random.default_rng(1))
    half = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in checkpoint.items()}
    net = Net()
    nn.load_torch_state_dict(net, half)  # PyTorch's load_state_dict casts as it copies
    np.testing.assert_array_equal(net.conv.weight.numpy(), checkpoint["conv.weight"].astype(np.float16))
    assert net.conv.weight.dtype == np.float32

    partial = {k: v for k, v in checkpoint.items() if not k.startswith("conv")} | {"extra.weight": np.zeros(2)}
    before = net.bn.weight.numpy().copy()
    with pytest.raises(HlotraceError, match=r"missing keys \['conv.weight'\] and unexpected keys \['extra.weight'\]"):
        nn.load_torch_state_dict(net, partial)
    np.testing.assert_array_equal(net.bn.weight.numpy(), before)  # nothing loaded
    assert nn.load_torch_state_dict(net, partial, strict=False) == nn.IncompatibleKeys(
        ["conv.weight"], ["extra.weight"]
    )
    np.testing.assert_array_equal(net.bn.weight.numpy(), checkpoint["bn.weight"])

    untied = dict(checkpoint, **{"head.weight": checkpoint["emb.weight"] + 1})
    with pytest.raises(HlotraceError, match=r"'head\.weight' and 'emb\.weight' are one tied tensor"):
        nn.load_torch_state_dict(Net(), untied)
    with pytest.raises(HlotraceError, match=r"'conv.weight' has shape \(3, 2, 1, 1\) in the checkpoint"):
        nn.load_torch_state_dict(Net(), dict(checkpoint, **{"conv.weight": np.zeros((3, 2, 1, 1), np.float32)}))
    with pytest.raises(HlotraceError, match="only float values are cast"):
        nn.load_torch_state_dict(Net(), dict(checkpoint, **{"bn.bias": np.zeros(3, np.int32)}))


def test_the_safetensors_format_written_by_hand_reads_back(tmp_path):
    """The documented layout: u64 little-endian header size, JSON header, raw little-endian data."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([1, -2], np.int64)
    header = {
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
        "b": {"dtype": "I64", "shape": [2], "data_offsets": [24, 40]},
    }
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path = tmp_path / "hand.safetensors"
    path.write_bytes(struct.pack("<Q", len(text)) + text + a.tobytes() + b.tobytes())
    loaded = load_safetensors(path)
    np.testing.assert_array_equal(loaded["a"], a)
    np.testing.assert_array_equal(loaded["b"], b)
    loaded["a"][0, 0] = 5  # a writable copy
    out = tmp_path / "out.safetensors"
    save_safetensors({"w": ht.tensor(a), "b": b}, out)
    (size,) = struct.unpack("<Q", out.read_bytes()[:8])
    raw = out.read_bytes()
    entry = json.loads(raw[8 : 8 + size])["w"]
    assert (entry["dtype"], entry["shape"]) == ("F32", [2, 3])
    start, stop = (8 + size + offset for offset in entry["data_offsets"])
    np.testing.assert_array_equal(np.frombuffer(raw[start:stop], "<f4").reshape(2, 3), a)
    with pytest.raises(HlotraceError, match=r"an existing \.safetensors file"):
        load_safetensors(tmp_path / "missing.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(HlotraceError, match="is not a readable safetensors file"):
        load_safetensors(tmp_path / "bad.safetensors")
