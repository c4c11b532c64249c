"""nn containers (ModuleList, ModuleDict, ParameterList, ParameterDict), non-persistent
buffers, the plain-list hint, and the small modules (Flatten, Unflatten, BatchNorm1d,
RMSNorm, Softmax, LogSoftmax, Mish, Hardswish) against NumPy, eagerly and compiled."""

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn, optim
from hlotrace.autodiff import GradManager
from hlotrace.errors import HlotraceError, TraceError
from hlotrace.jit import xla_trace


def _t(values, dtype="float32"):
    return ht.tensor(np.asarray(values, dtype=dtype))


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.register_buffer("steps", _t(0.0))
        self.register_buffer("scratch", _t(np.zeros(width)), persistent=False)

    def forward(self, x):
        return F.relu(self.fc(x))


class Tower(nn.Module):
    def __init__(self, depth=3, width=4):
        super().__init__()
        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])
        self.heads = nn.ModuleDict({"cls": nn.Linear(width, 2), "reg": nn.Linear(width, 1)})
        self.scales = nn.ParameterList([np.ones(width, np.float32)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x) * self.scales[0]
        return self.heads["cls"](x), self.heads["reg"](x)


# -- containers -----------------------------------------------------------------------------------
def test_module_list_registers_its_entries_with_pytorch_keys():
    net = Tower(depth=2)
    assert list(net.state_dict()) == [  # PyTorch's order: each module's own entries, then its children
        "blocks.0.steps",
        "blocks.0.fc.weight",
        "blocks.0.fc.bias",
        "blocks.1.steps",
        "blocks.1.fc.weight",
        "blocks.1.fc.bias",
        "heads.cls.weight",
        "heads.cls.bias",
        "heads.reg.weight",
        "heads.reg.bias",
        "scales.0",
    ]
    assert len(list(net.parameters())) == 9
    assert [n for n, _ in net.named_modules()][:4] == ["", "blocks", "blocks.0", "blocks.0.fc"]


def test_module_list_indexing_slicing_and_mutation_renumber_entries():
    a, b, c, d = (nn.Linear(2, 2) for _ in range(4))
    ml = nn.ModuleList([a, b])
    ml.append(c)
    assert len(ml) == 3 and ml[-1] is c and list(ml) == [a, b, c]
    sliced = ml[1:]
    assert isinstance(sliced, nn.ModuleList) and list(sliced) == [b, c]
    ml.insert(0, d)
    assert list(ml) == [d, a, b, c]
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2", "3"]
    del ml[1]
    assert list(ml) == [d, b, c] and [n for n, _ in ml.named_children()] == ["0", "1", "2"]
    assert ml[2] is c and ml[-3] is d
    ml[0] = a
    assert ml[0] is a and len(list(ml.parameters())) == 6
    ml += [d]
    assert list(ml) == [a, b, c, d] and len(ml + nn.ModuleList([a])) == 5
    with pytest.raises(IndexError, match="out of range for 4"):
        ml[4]
    with pytest.raises(HlotraceError, match="entry 4 is a int, not a Module"):
        ml.append(3)
    with pytest.raises(NotImplementedError, match="iterate over it"):
        ml(1)


def test_module_dict_keys_order_and_refused_keys():
    md = nn.ModuleDict([("b", nn.Linear(2, 3)), ("a", nn.ReLU())])
    assert md.keys() == ["b", "a"] and list(md) == ["b", "a"] and "a" in md and "z" not in md
    md["c"] = nn.Linear(3, 1)
    assert [n for n, _ in md.named_parameters()] == ["b.weight", "b.bias", "c.weight", "c.bias"]
    popped = md.pop("b")
    assert isinstance(popped, nn.Linear) and md.keys() == ["a", "c"]
    md.update({"d": nn.Identity()})
    assert len(md) == 3 and [type(v).__name__ for v in md.values()] == ["ReLU", "Linear", "Identity"]
    for bad in ("train", "keys", "forward", "a.b", ""):
        with pytest.raises(HlotraceError, match="key"):
            md[bad] = nn.ReLU()
    with pytest.raises(KeyError):
        md["missing"]
    md.clear()
    assert len(md) == 0 and list(md.parameters()) == []


def test_parameter_list_and_dict_wrap_arrays_and_reach_the_optimizer():
    existing = ht.Parameter(np.zeros(2, np.float32))
    pl = nn.ParameterList([existing, _t([1.0, 2.0]), np.ones((2, 2), np.float32)])
    assert pl[0] is existing and all(isinstance(p, ht.Parameter) for p in pl)
    np.testing.assert_array_equal(pl[1].numpy(), [1.0, 2.0])
    pd = nn.ParameterDict({"scale": np.ones(3, np.float32)})
    pd["shift"] = np.zeros(3, np.float32)
    assert [n for n, _ in pd.named_parameters()] == ["scale", "shift"]
    opt = optim.SGD([*pl.parameters(), *pd.parameters()], lr=0.5)
    for p in pl:
        p.grad = ht.tensor(np.ones(p.shape, np.float32))
    opt.step()
    np.testing.assert_array_equal(pl[0].numpy(), [-0.5, -0.5])
    with pytest.raises(HlotraceError, match="not a Parameter, Tensor or array"):
        pl.append("w")


# -- buffers ----------------------------------------------------------------------------------------
def test_non_persistent_buffers_are_buffers_but_not_saved():
    net = Tower(depth=2)
    assert [n for n, _ in net.named_buffers()] == [
        "blocks.0.steps",
        "blocks.0.scratch",
        "blocks.1.steps",
        "blocks.1.scratch",
    ]
    state = net.state_dict()
    assert not any("scratch" in k for k in state)
    fresh = Tower(depth=2)
    assert fresh.load_state_dict(state) == ([], [])  # strict: the scratch buffers are not expected
    with pytest.raises(HlotraceError, match="unexpected keys"):
        fresh.load_state_dict({**state, "blocks.0.scratch": np.zeros(4, np.float32)})
    # Re-registering as persistent puts it back; reassigning keeps the flag.
    block = net.blocks[0]
    block.scratch = _t(np.ones(4))
    assert "blocks.0.scratch" not in net.state_dict()
    block.register_buffer("scratch", _t(np.ones(4)), persistent=True)
    assert "blocks.0.scratch" in net.state_dict()
    del block.scratch
    block.register_buffer("scratch", _t(np.ones(4)))
    assert "blocks.0.scratch" in net.state_dict()


def test_a_compiled_step_updates_non_persistent_buffers_in_place():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", _t(0.0), persistent=False)

        def forward(self, x):
            self.calls._assign(self.calls + 1.0)
            return x * 2.0

    @xla_trace
    def step(x, net):
        return net(x)

    net = Counter()
    for _ in range(3):
        step(_t([1.0]), net)
    assert net.calls.item() == 3.0 and step.cache_size == 1


def test_plain_list_of_modules_gets_a_hint_naming_the_attribute_and_module_list():
    class Listed(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(2, 2), nn.Linear(2, 2)]

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    net = Listed()
    assert list(net.parameters()) == []  # as PyTorch: a plain list registers nothing
    step = xla_trace(lambda x, net: net(x))
    with pytest.raises(TraceError, match=r"kept in Listed\.layers, a plain Python list .* nn\.ModuleList") as info:
        step(_t(np.ones((1, 2))), net)
    assert str(info.value).count("plain Python list") == 1
    # (A Parameter the step closes over is no error any more: closures are step inputs,
    # tests/test_closure_step.py.)


# -- small modules -----------------------------------------------------------------------------------
def test_flatten_and_unflatten():
    x = _rand(2, 3, 4, 5)
    np.testing.assert_array_equal(nn.Flatten()(ht.tensor(x)).numpy(), x.reshape(2, 60))
    np.testing.assert_array_equal(nn.Flatten(0, 1)(ht.tensor(x)).numpy(), x.reshape(6, 4, 5))
    y = nn.Unflatten(1, (3, -1))(ht.tensor(x.reshape(2, 60)))
    np.testing.assert_array_equal(y.numpy(), x.reshape(2, 3, 20))
    assert nn.Unflatten(-2, (2, 2))(ht.tensor(x)).shape == (2, 3, 2, 2, 5)
    with pytest.raises(HlotraceError, match="Unflatten: dim 4 is out of range"):
        nn.Unflatten(4, (1,))(ht.tensor(x))


@pytest.mark.parametrize("shape", [(8, 3), (6, 3, 5)])
def test_batch_norm_1d_matches_numpy_in_train_and_eval(shape):
    x = _rand(*shape, seed=1) * 3 + 1
    bn = nn.BatchNorm1d(3, momentum=0.9)
    bn.weight._assign(_t([1.0, 2.0, 0.5]))
    bn.bias._assign(_t([0.0, -1.0, 3.0]))
    axes = tuple(d for d in range(len(shape)) if d != 1)
    mean, var = x.mean(axes), x.var(axes)
    bshape = (1, 3) + (1,) * (len(shape) - 2)
    expected = (x - mean.reshape(bshape)) / np.sqrt(var.reshape(bshape) + 1e-5)
    expected = expected * np.array([1.0, 2.0, 0.5]).reshape(bshape) + np.array([0.0, -1.0, 3.0]).reshape(bshape)
    np.testing.assert_allclose(bn(ht.tensor(x)).numpy(), expected, rtol=1e-4, atol=1e-5)
    count = x.size // 3
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * mean, rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * var * count / (count - 1), rtol=1e-5)
    bn.eval()
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    expected_eval = (x - rm.reshape(bshape)) / np.sqrt(rv.reshape(bshape) + 1e-5)
    expected_eval = expected_eval * np.array([1.0, 2.0, 0.5]).reshape(bshape) + np.array([0.0, -1.0, 3.0]).reshape(
        bshape
    )
    np.testing.assert_allclose(bn(ht.tensor(x)).numpy(), expected_eval, rtol=1e-4, atol=1e-5)
    with pytest.raises(HlotraceError, match=r"BatchNorm1d expects an \(N, C\) or \(N, C, L\) input"):
        bn(ht.tensor(_rand(2, 3, 4, 4)))
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_rms_norm_matches_numpy(dtype):
    x = _rand(3, 4, 6, seed=2)
    norm = nn.RMSNorm((4, 6), eps=1e-6)
    norm.weight._assign(ht.tensor(np.linspace(0.5, 2, 24, dtype=np.float32).reshape(4, 6)))
    expected = x / np.sqrt((x * x).mean(axis=(1, 2), keepdims=True) + 1e-6) * norm.weight.numpy()
    got = norm(ht.tensor(x).astype(dtype)) if dtype != "float32" else norm(ht.tensor(x))
    tol = 1e-5 if dtype == "float32" else 3e-2
    np.testing.assert_allclose(np.asarray(got.numpy(), np.float32), expected, rtol=tol, atol=tol)
    # eps=None is the dtype's machine epsilon; no weight without elementwise_affine.
    plain = nn.RMSNorm(6, elementwise_affine=False)
    assert list(plain.parameters()) == []
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(
        plain(ht.tensor(x)).numpy(), x / np.sqrt((x * x).mean(-1, keepdims=True) + eps), rtol=1e-5
    )
    with pytest.raises(Exception, match="rms_norm: x must be a float tensor ending in dims"):
        plain(ht.tensor(_rand(3, 5)))


def test_activation_modules_match_numpy():
    x = np.array([[-5.0, -3.0, -1.5, 0.0, 0.5, 2.9, 3.0, 7.0]], np.float32)
    shifted = x - x.max(-1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    np.testing.assert_allclose(nn.Softmax(dim=-1)(ht.tensor(x)).numpy(), np.exp(log_softmax), rtol=1e-5)
    np.testing.assert_allclose(nn.LogSoftmax(dim=1)(ht.tensor(x)).numpy(), log_softmax, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.Mish()(ht.tensor(x)).numpy(), x * np.tanh(np.log1p(np.exp(x))), rtol=1e-5)
    hardswish = x * np.clip(x + 3, 0, 6) / 6
    np.testing.assert_allclose(nn.Hardswish()(ht.tensor(x)).numpy(), hardswish, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(nn.Softmax(dim=0)(ht.tensor(x)).numpy(), np.ones_like(x))


def test_linear_functional_matches_the_module_and_numpy():
    fc = nn.Linear(3, 4)
    x = _rand(5, 3)
    expected = x @ fc.weight.numpy().T + fc.bias.numpy()
    np.testing.assert_allclose(F.linear(ht.tensor(x), fc.weight, fc.bias).numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(F.linear(ht.tensor(x), fc.weight).numpy(), x @ fc.weight.numpy().T, rtol=1e-5)
    with pytest.raises(Exception, match="linear: weight must be"):
        F.linear(ht.tensor(x), ht.tensor(_rand(4, 2)))


def test_modules_train_compiled_as_eagerly():
    """Tower (ModuleList/ModuleDict/ParameterList) + BatchNorm1d + RMSNorm + Mish + Flatten."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.flat = nn.Flatten()
            self.norm = nn.RMSNorm(8)
            self.bn = nn.BatchNorm1d(8)
            self.tower = Tower(depth=2, width=8)
            self.act = nn.Mish()

        def forward(self, x):
            return self.tower(self.act(self.norm(self.bn(self.flat(x)))))

    def step(x, y, net, opt, gm):
        with gm:
            cls, reg = net(x)
            loss = F.cross_entropy(cls, y) + F.mse_loss(reg, F.zeros_like(reg))
            gm.backward(loss)
        opt.step().clear_grad()
        return loss

    def setup():
        nn.init.seed(3)
        net = Net()
        return net, optim.SGD(net.parameters(), lr=0.1, momentum=0.9), GradManager().attach(net.parameters())

    eager, compiled = setup(), setup()
    traced = xla_trace(step)
    for i in range(4):
        x, y = ht.tensor(_rand(6, 2, 4, seed=i)), _t(np.arange(6) % 2, "int32")
        le, lc = step(x, y, *eager), traced(x, y, *compiled)
        np.testing.assert_allclose(lc.numpy(), le.numpy(), rtol=1e-5)
    for (name, a), b in zip(compiled[0].state_dict().items(), eager[0].state_dict().values(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6, err_msg=name)
    assert traced.cache_size == 1
