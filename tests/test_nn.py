"""hlotrace.nn (Module, Linear, Sequential, ReLU, init) and hlotrace.serialization save/load. Eager only."""

import math
from collections import OrderedDict

import ml_dtypes
import numpy as np
import pytest

import hlotrace as ht
from hlotrace import functional as F
from hlotrace import nn, optim
from hlotrace.errors import HlotraceError
from hlotrace.nn import init
from hlotrace.serialization import load, save


def _p(*shape, fill=0.0):
    return ht.Parameter(np.full(shape, fill, np.float32))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.scale = _p(8, fill=1.0)  # assigned between two sub-modules
        self.register_buffer("count", ht.tensor(np.zeros((), np.float32)))
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 2)
        self.plain = 3  # ordinary attribute, not registered
        self.untracked = ht.tensor(np.ones(2, np.float32))  # plain Tensor: not registered either

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x) * self.scale))


# -- Module registration ------------------------------------------------------------------------
def test_named_parameters_follow_assignment_order():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["fc1.weight", "fc1.bias", "scale", "fc2.weight", "fc2.bias"]
    assert [n for n, _ in net.named_buffers()] == ["count"]
    assert [p for p in net.parameters()][2] is net.scale
    assert [n for n, _ in net.named_parameters(recurse=False)] == ["scale"]
    assert [n for n, _ in net.named_children()] == ["fc1", "act", "fc2"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "act", "fc2"]
    assert next(iter(net.modules())) is net and list(net.children())[1] is net.act


def test_parameters_and_modules_are_deduplicated_by_identity():
    net = Net()
    net.tied = net.fc1.weight  # the same Parameter under a second name
    net.again = net.fc1  # the same module under a second name
    names = [n for n, _ in net.named_parameters()]
    assert names == ["fc1.weight", "fc1.bias", "scale", "fc2.weight", "fc2.bias"]
    assert len(list(net.parameters())) == 5
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "act", "fc2"]
    assert len(list(net.children())) == 3
    # state_dict: PyTorch's order (own parameters, own buffers, then children), each tensor
    # once under its first name there: the parent's alias "tied" before "fc1.weight"
    assert list(net.state_dict()) == ["scale", "tied", "count", "fc1.bias", "fc2.weight", "fc2.bias"]


def test_reassignment_and_deletion_update_the_registration():
    net = Net()
    net.scale = _p(8, fill=2.0)  # replacing keeps the position
    assert [n for n, _ in net.named_parameters()][2] == "scale"
    assert net.scale.numpy()[0] == 2.0
    net.scale = None  # a registered slot set to None is skipped, stays registered
    assert "scale" not in dict(net.named_parameters())
    net.scale = _p(8)
    assert [n for n, _ in net.named_parameters()][2] == "scale"
    del net.fc2
    assert [n for n, _ in net.named_parameters()] == ["fc1.weight", "fc1.bias", "scale"]
    with pytest.raises(HlotraceError, match="registered parameter"):
        net.scale = ht.tensor(np.zeros(8, np.float32))
    net.count = ht.tensor(np.ones((), np.float32))  # a buffer takes a plain tensor
    assert dict(net.named_buffers())["count"].numpy() == 1.0


def test_register_buffer_errors_and_missing_super_init():
    net = Net()
    with pytest.raises(HlotraceError, match="expected a Tensor"):
        net.register_buffer("b", np.zeros(3))
    with pytest.raises(HlotraceError, match="already a registered"):
        net.register_buffer("fc1", ht.tensor(np.zeros(3, np.float32)))
    with pytest.raises(HlotraceError, match="Parameter is trainable"):
        net.register_buffer("b", _p(3))
    with pytest.raises(HlotraceError, match="bad buffer name"):
        net.register_buffer("a.b", ht.tensor(np.zeros(3, np.float32)))

    class Forgot(nn.Module):
        def __init__(self):
            self.w = _p(2)

    with pytest.raises(HlotraceError, match=r"super\(\).__init__\(\)"):
        Forgot()


def test_train_eval_propagate_and_key_the_trace_state():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    key_eval, tensors = net._trace_state()
    net.fc1.train()
    assert net.fc1.training and not net.training and not net.fc2.training
    assert net.train() is net and all(m.training for m in net.modules())
    key_train, tensors2 = net._trace_state()
    assert key_eval[0] == (False,) * 4 and key_train[0] == (True,) * 4
    hash(key_train)
    expected = [t for _, t in net.named_parameters()] + [net.count]
    assert all(a is b for a, b in zip(tensors, expected, strict=True)) and len(tensors) == len(expected)
    assert all(a is b for a, b in zip(tensors2, tensors, strict=True))


def test_zero_grad_and_call_forward():
    net = Net()
    for p in net.parameters():
        p.grad = ht.tensor(np.ones(p.shape, np.float32))
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    assert net(ht.tensor(np.ones((5, 4), np.float32))).shape == (5, 2)
    with pytest.raises(NotImplementedError):
        nn.Module()(1)


def test_repr():
    text = repr(nn.Sequential(nn.Linear(2, 3, bias=False), nn.ReLU()))
    assert "(0): Linear(in_features=2, out_features=3, bias=False)" in text and "(1): ReLU()" in text


# -- layers ---------------------------------------------------------------------------------------
def test_linear_shapes_forward_and_no_bias():
    fc = nn.Linear(3, 5)
    assert fc.weight.shape == (5, 3) and fc.bias.shape == (5,)
    assert isinstance(fc.weight, ht.Parameter) and fc.weight.dtype == np.float32
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = fc(ht.tensor(x)).numpy()
    np.testing.assert_allclose(out, x @ fc.weight.numpy().T + fc.bias.numpy(), rtol=1e-6)
    fc_nb = nn.Linear(3, 5, bias=False)
    assert fc_nb.bias is None and [n for n, _ in fc_nb.named_parameters()] == ["weight"]
    np.testing.assert_allclose(fc_nb(ht.tensor(x)).numpy(), x @ fc_nb.weight.numpy().T, rtol=1e-6)


def test_linear_init_bounds_and_seed():
    init.seed(123)
    fc = nn.Linear(64, 256)
    bound = 1 / math.sqrt(64)
    w, b = fc.weight.numpy(), fc.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.95 * bound and w.min() < -0.9 * bound  # spans the interval
    assert abs(float(w.mean())) < 0.05 * bound  # centred
    init.seed(123)
    fc2 = nn.Linear(64, 256)
    np.testing.assert_array_equal(fc2.weight.numpy(), w)
    np.testing.assert_array_equal(fc2.bias.numpy(), b)
    assert not np.array_equal(nn.Linear(64, 256).weight.numpy(), w)


def test_relu_with_and_without_functional_relu(monkeypatch):
    x = ht.tensor(np.array([-2.0, -0.0, 0.5, 3.0], np.float32))
    np.testing.assert_array_equal(nn.ReLU()(x).numpy(), [0.0, 0.0, 0.5, 3.0])
    monkeypatch.setattr(F, "relu", None, raising=False)  # the fallback F.maximum(x, 0.0)
    np.testing.assert_array_equal(nn.ReLU()(x).numpy(), [0.0, 0.0, 0.5, 3.0])


def test_sequential_indexing_iteration_and_forward():
    a, r, b = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, r, b)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is b and seq[-3] is a
    assert all(x is y for x, y in zip(seq, [a, r, b], strict=True)) and len(list(seq)) == 3
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2 and head[0] is a and head[1] is r
    assert len(seq[::2]) == 2 and seq[::2][1] is b
    with pytest.raises(IndexError, match="out of range"):
        seq[3]
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    x = ht.tensor(np.ones((4, 2), np.float32))
    np.testing.assert_allclose(seq(x).numpy(), b(r(a(x))).numpy())
    assert seq.append(nn.Identity()) is seq and len(seq) == 4
    named = nn.Sequential(OrderedDict(enc=nn.Linear(2, 2), act=nn.ReLU()))
    assert [n for n, _ in named.named_parameters()] == ["enc.weight", "enc.bias"]
    with pytest.raises(HlotraceError, match="not a Module"):
        nn.Sequential(a, 3)


# -- init ---------------------------------------------------------------------------------------
def test_init_functions_work_in_place():
    init.seed(0)
    w = _p(200, 100)
    assert init.uniform_(w, -0.5, 0.25) is w
    assert w.numpy().min() >= -0.5 and w.numpy().max() <= 0.25 and w.dtype == np.float32
    init.normal_(w, mean=1.0, std=0.1)
    assert abs(w.numpy().mean() - 1.0) < 0.01 and abs(w.numpy().std() - 0.1) < 0.01
    init.zeros_(w)
    assert not w.numpy().any()
    init.ones_(w)
    assert (w.numpy() == 1).all()
    init.kaiming_uniform_(w, nonlinearity="relu")
    bound = math.sqrt(2.0) * math.sqrt(3.0 / 100)  # fan_in = 100
    assert np.abs(w.numpy()).max() <= bound and np.abs(w.numpy()).max() > 0.95 * bound
    init.kaiming_uniform_(w, a=math.sqrt(5))  # what PyTorch's Linear uses: 1/sqrt(fan_in)
    assert np.abs(w.numpy()).max() <= 1 / math.sqrt(100) + 1e-7
    init.xavier_uniform_(w, gain=2.0)
    bound = 2.0 * math.sqrt(6.0 / 300)
    assert np.abs(w.numpy()).max() <= bound and np.abs(w.numpy()).max() > 0.95 * bound
    assert init.calculate_fan_in_and_fan_out(ht.tensor(np.zeros((8, 3, 5, 5)))) == (75, 200)
    bf = ht.Parameter(np.zeros((3, 3), np.float32), dtype="bfloat16")
    init.uniform_(bf)
    assert bf.dtype == ml_dtypes.bfloat16 and bf.numpy().astype(np.float32).any()
    with pytest.raises(HlotraceError, match="at least 2 dims"):
        init.xavier_uniform_(_p(3))


# -- state dicts and save/load --------------------------------------------------------------------
def test_state_dict_is_a_copy():
    net = Net()
    sd = net.state_dict()
    assert list(sd) == ["scale", "count", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]  # PyTorch's order
    assert all(isinstance(v, np.ndarray) for v in sd.values())
    before = sd["scale"].copy()
    net.scale += 1.0
    np.testing.assert_array_equal(sd["scale"], before)
    sd["fc1.bias"][:] = 7.0  # writable, and not the parameter's storage
    assert not (net.fc1.bias.numpy() == 7.0).any()


def test_save_load_round_trip_into_a_fresh_model(tmp_path):
    init.seed(1)
    net = Net()
    net.count += 3.0
    path = tmp_path / "model.ckpt"  # written as given: no .npz appended
    save(net.state_dict(), path)
    assert path.exists() and not (tmp_path / "model.ckpt.npz").exists()

    init.seed(2)
    fresh = Net()
    params_before = list(fresh.parameters())
    opt = optim.SGD(fresh.parameters(), lr=0.5)
    result = fresh.load_state_dict(load(path))
    assert result.missing_keys == [] and result.unexpected_keys == []
    for (name, a), (_, b) in zip(net.state_dict().items(), fresh.state_dict().items(), strict=True):
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert all(a is b for a, b in zip(fresh.parameters(), params_before, strict=True))  # identity kept
    # the optimizer built before loading updates the loaded values
    fresh.scale.grad = ht.tensor(np.ones(8, np.float32))
    opt.step()
    np.testing.assert_allclose(fresh.scale.numpy(), net.scale.numpy() - 0.5)


def test_load_state_dict_errors_name_the_key_and_change_nothing():
    net = Net()
    sd = net.state_dict()
    snapshot = {k: v.copy() for k, v in sd.items()}
    other = Net()
    bad = dict(sd)
    bad["fc2.weight"] = np.zeros((3, 8), np.float32)
    with pytest.raises(HlotraceError, match=r"'fc2.weight'.*\(3, 8\).*\(2, 8\)"):
        other.load_state_dict(bad)
    bad = dict(sd)
    bad["scale"] = sd["scale"].astype(np.float16)
    with pytest.raises(HlotraceError, match=r"'scale'.*float16.*float32"):
        other.load_state_dict(bad)
    missing = {k: v for k, v in sd.items() if k != "count"}
    with pytest.raises(HlotraceError, match=r"missing keys \['count'\]"):
        other.load_state_dict(missing)
    with pytest.raises(HlotraceError, match=r"unexpected keys \['extra'\]"):
        other.load_state_dict({**sd, "extra": np.zeros(1, np.float32)})
    # nothing was written by the failed loads (the first entries were valid)
    assert not np.array_equal(other.fc1.weight.numpy(), snapshot["fc1.weight"])
    result = other.load_state_dict({**missing, "extra": np.zeros(1)}, strict=False)
    assert result.missing_keys == ["count"] and result.unexpected_keys == ["extra"]
    np.testing.assert_array_equal(other.fc1.weight.numpy(), snapshot["fc1.weight"])
    other.load_state_dict({k: ht.tensor(v) for k, v in sd.items()})  # Tensors are accepted too


def test_save_load_nested_bfloat16_and_scalars(tmp_path):
    obj = {
        "model": {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "h": np.array([1.5, -2.0], ml_dtypes.bfloat16)},
        "optim": {"state": {0: {"step": np.float32(3.0)}}, "param_groups": [{"lr": 0.1, "betas": (0.9, 0.99)}]},
        "epoch": 7,
        "name": "run-1",
        "none": None,
        "mask": np.array([True, False]),
        "tensor": ht.tensor(np.ones(2, np.float32)),
    }
    save(obj, tmp_path / "ckpt.npz")
    back = load(tmp_path / "ckpt.npz")
    assert back["model"]["h"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(back["model"]["h"], obj["model"]["h"])
    np.testing.assert_array_equal(back["model"]["w"], obj["model"]["w"])
    assert back["optim"]["state"][0]["step"] == 3.0 and list(back["optim"]["state"]) == [0]
    assert back["optim"]["param_groups"] == [{"lr": 0.1, "betas": (0.9, 0.99)}]
    assert (back["epoch"], back["name"], back["none"]) == (7, "run-1", None)
    assert back["mask"].dtype == np.bool_
    np.testing.assert_array_equal(back["tensor"], np.ones(2, np.float32))
    # readable with plain NumPy, without pickle
    with np.load(tmp_path / "ckpt.npz", allow_pickle=False) as data:
        assert "model/w" in data.files
        assert data["model/h"].dtype == np.uint16


def test_save_refuses_what_would_need_pickle(tmp_path):
    with pytest.raises(HlotraceError, match="object"):
        save({"bad": np.array([{}, 1], dtype=object)}, tmp_path / "x.npz")
    with pytest.raises(HlotraceError, match="set"):
        save({"bad": {1, 2}}, tmp_path / "x.npz")
    with pytest.raises(HlotraceError, match="key"):
        save({(1, 2): np.zeros(1)}, tmp_path / "x.npz")
    assert not (tmp_path / "x.npz").exists()


def test_load_plain_npz_and_bad_files(tmp_path):
    np.savez(tmp_path / "plain.npz", a=np.ones(2, np.float32))
    assert list(load(tmp_path / "plain.npz")) == ["a"]
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(
        HlotraceError, match=r"junk.npz'.*hlotrace.save wrote.*not a zip archive \(it starts with b'not a zip"
    ):
        load(tmp_path / "junk.npz")
    with pytest.raises(HlotraceError, match="no such file"):
        load(tmp_path / "missing.npz")
