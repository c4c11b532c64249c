"""PyTorch's spellings that model code uses, beside hlotrace's NumPy ones (issue 36: a model
file ports with only its imports swapped): two-dim ``Tensor.transpose``, ``dim=``/``keepdim=``
as aliases of ``axis=``/``keepdims=``, ``F.cat``, ``F.pad`` with PyTorch's flat list,
``Tensor.device``/``.to`` and ``Parameter.requires_grad``. Each against NumPy, eagerly and
inside ``xla_trace`` (the compiled call equals the eager one). And the training-loop spellings
(``hlotrace.torch``): ``torch.no_grad``, ``loss.backward()`` (eager, in ``xla_trace`` and with
a ``partial_trace`` forward), ``optimizer.zero_grad(set_to_none=)``, and MegEngine's
``xla_trace(without_host=, symbolic_shape=)``."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
import hlotrace.torch as torch
from hlotrace.autodiff import GradManager
from hlotrace.errors import ArgumentError, HlotraceError
from hlotrace.jit import partial_trace, xla_trace
from hlotrace.torch import nn, optim

RNG = np.random.default_rng(36)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)


def _eager_and_compiled(fn, *arrays):
    """``fn`` on tensors of ``arrays``: its eager result, and asserts the compiled one equals it."""
    eager = fn(*[ht.tensor(a) for a in arrays])
    step = xla_trace(fn)
    step(*[ht.tensor(a) for a in arrays])  # the recording call
    compiled = step(*[ht.tensor(a) for a in arrays])
    eager_list = eager if isinstance(eager, tuple | list) else [eager]
    compiled_list = compiled if isinstance(compiled, tuple | list) else [compiled]
    for e, c in zip(eager_list, compiled_list, strict=True):
        np.testing.assert_allclose(c.numpy(), e.numpy(), rtol=1e-6, atol=1e-6)
    return eager


# -- 1. Tensor.transpose(dim0, dim1) ------------------------------------------------------------


def test_transpose_of_two_dims_swaps_them_on_a_matrix_too():
    m = X[0]  # (3, 4): NumPy's m.transpose(0, 1) would be the identity; PyTorch's swaps
    got = _eager_and_compiled(lambda t: t.transpose(0, 1), m)
    np.testing.assert_array_equal(got.numpy(), m.T)
    assert ht.tensor(m).transpose(1, 0).shape == (4, 3)
    np.testing.assert_array_equal(ht.tensor(X).transpose(np.int64(0), -1).numpy(), X.swapaxes(0, -1))


def test_transpose_dims_out_of_range_and_mT_of_a_vector_are_errors():
    with pytest.raises(IndexError, match=r"Tensor.transpose: dim 3 is out of range for a 3-d tensor"):
        ht.tensor(X).transpose(0, 3)
    with pytest.raises(ht.errors.OpError, match=r"Tensor.mT: needs a tensor of rank >= 2"):
        ht.tensor(X[0, 0]).mT  # noqa: B018


# -- 2. dim= / keepdim= as aliases of axis= / keepdims=, F.cat --------------------------------


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_functional_softmax_log_softmax_and_cat_take_dim():
    got = _eager_and_compiled(lambda t: F.softmax(t, dim=1), X)
    np.testing.assert_allclose(got.numpy(), _softmax(X, 1), rtol=1e-6, atol=1e-7)
    got = _eager_and_compiled(lambda t: F.log_softmax(t, dim=0), X)
    np.testing.assert_allclose(got.numpy(), np.log(_softmax(X, 0)), rtol=1e-5, atol=1e-6)
    got = _eager_and_compiled(lambda a, b: F.cat([a, b], dim=-1), X, X[..., :2])
    np.testing.assert_array_equal(got.numpy(), np.concatenate([X, X[..., :2]], axis=-1))
    got = _eager_and_compiled(lambda a, b: F.cat((a, b), 1), X, X)
    np.testing.assert_array_equal(got.numpy(), np.concatenate([X, X], axis=1))
    assert F.cat([ht.tensor(X)] * 2).shape == (4, 3, 4)  # dim 0 by default, as torch.cat


def test_max_with_dim_is_pytorchs_values_and_indices_pair():
    # a traced function returns tuples, lists and dicts, not named tuples: unpack it there
    values, indices = _eager_and_compiled(lambda t: tuple(t.max(dim=2)), X)
    np.testing.assert_array_equal(values.numpy(), X.max(axis=2))
    np.testing.assert_array_equal(indices.numpy(), X.argmax(axis=2))
    pair = ht.tensor(X).min(dim=0)
    assert pair.values.shape == pair.indices.shape == (3, 4)
    assert ht.tensor(X).max(0).shape == (3, 4)  # NumPy's positional axis: the values only


def test_giving_both_spellings_is_an_error():
    t = ht.tensor(X)
    with pytest.raises(TypeError, match=r"sum: give axis= or dim= \(PyTorch's name\), not both"):
        t.sum(axis=0, dim=1)
    with pytest.raises(TypeError, match=r"mean: give keepdims= or keepdim="):
        t.mean(dim=0, keepdim=True, keepdims=True)
    with pytest.raises(TypeError, match=r"softmax: give axis= or dim="):
        F.softmax(t, axis=0, dim=0)
    with pytest.raises(TypeError):
        F.log_softmax(t, -1, dim=0)  # a positional axis and dim=


# -- 3. F.pad with PyTorch's flat list -----------------------------------------------------------


def _torch_pad_reference(x, flat, mode="constant", value=0.0):
    """PyTorch's F.pad in NumPy: the flat list's pairs apply to the last dim first; negative
    widths crop."""
    widths = [[0, 0] for _ in range(x.ndim)]
    for i in range(len(flat) // 2):
        widths[x.ndim - 1 - i] = [flat[2 * i], flat[2 * i + 1]]
    crop = tuple(slice(max(-b, 0), d - max(-a, 0)) for d, (b, a) in zip(x.shape, widths, strict=True))
    widths = [(max(b, 0), max(a, 0)) for b, a in widths]
    numpy_mode = {"replicate": "edge"}.get(mode, mode)
    kwargs = {"constant_values": value} if mode == "constant" else {}
    return np.pad(x[crop], widths, mode=numpy_mode, **kwargs)


@pytest.mark.parametrize(
    ("flat", "mode"),
    [
        ([1, 2, 0, 3], "constant"),  # UNet's F.pad(x1, [diffX // 2, ..., diffY // 2, ...])
        ((2, 1, 1, 2, 1, 0), "constant"),
        ((1, 1, 2, 0), "reflect"),
        ([0, 2, 1, 1], "replicate"),
        ((-1, 2, 1, -2), "constant"),  # negative widths crop
    ],
)
def test_pad_takes_pytorchs_flat_list_last_dim_first(flat, mode):
    got = _eager_and_compiled(lambda t: F.pad(t, flat, mode), X)
    np.testing.assert_array_equal(got.numpy(), _torch_pad_reference(X, flat, mode))


def test_pad_keyword_is_pytorchs_even_for_a_pair_and_numpy_forms_are_unchanged():
    got = _eager_and_compiled(lambda t: F.pad(t, pad=(1, 2), value=-5.0), X)
    np.testing.assert_array_equal(got.numpy(), _torch_pad_reference(X, (1, 2), value=-5.0))
    assert got.shape == (2, 3, 7)  # the last dim only
    for width in (1, (1, 2), ((1, 2),), ((0, 1), (2, 0), (1, 1))):  # NumPy's forms
        np.testing.assert_array_equal(F.pad(ht.tensor(X), width).numpy(), np.pad(X, width))
    np.testing.assert_array_equal(F.pad(ht.tensor(X), (1, 2)).numpy(), np.pad(X, (1, 2)))  # every dim


def test_pytorch_pad_errors():
    t = ht.tensor(X)
    with pytest.raises(ht.errors.OpError, match=r"flat list of an even number of ints, at most 2 per dim \(6\)"):
        F.pad(t, pad=(1, 1, 1, 1, 1, 1, 1, 1))
    with pytest.raises(ht.errors.OpError, match=r"flat list of an even number"):
        F.pad(t, pad=(1, 1, 1))
    with pytest.raises(ht.errors.OpError, match=r"mode must be one of 'constant', 'reflect', 'replicate'"):
        F.pad(t, (1, 1, 1, 1), "circular")
    with pytest.raises(TypeError, match="not both"):
        F.pad(t, 1, pad=(1, 1))


# -- 4. Tensor.device, Tensor.to, requires_grad ----------------------------------------------------


def test_device_names_where_the_value_is_held():
    host = ht.tensor(X)
    assert host.device == "cpu:0" and host.device.type == "cpu" and host.device.index == 0
    step = xla_trace(lambda t: t * 2.0)
    step(host)
    out = step(host)  # held by the runtime's device: its DLPack device, by PyTorch's name
    kind, index = out.__dlpack_device__()
    assert out.device.type == {1: "cpu", 2: "cuda", 10: "rocm"}[int(kind)] and out.device.index == index
    assert isinstance(out.device, str) and out.device == f"{out.device.type}:{out.device.index}"


def test_to_a_device_is_the_tensor_itself_and_to_a_dtype_casts():
    t = ht.tensor(X)
    assert t.to("cpu") is t and t.to("cuda:0") is t and t.to(t.device) is t and t.to(device="cuda") is t
    assert t.to("float32") is t  # its own dtype: no cast recorded
    got = _eager_and_compiled(lambda a: a.to("cuda", dtype="float64").to(ht.tensor(np.zeros(1, np.int32))), X)
    np.testing.assert_array_equal(got.numpy(), X.astype(np.float64).astype(np.int32))
    assert got.dtype == np.int32
    with pytest.raises(TypeError, match="unexpected argument"):
        t.to("float16", "float32")
    with pytest.raises(TypeError, match="is not a device"):
        t.to(device="float16")


def test_requires_grad_is_pytorchs_flag_and_changes_no_gradient():
    from hlotrace import optim
    from hlotrace.autodiff import GradManager

    net = ht.nn.Linear(4, 2)
    assert all(p.requires_grad for p in net.parameters()) and not ht.tensor(X).requires_grad
    net.bias.requires_grad = False
    assert [n for n, p in net.named_parameters() if p.requires_grad] == ["weight"]  # nanoGPT's filter
    assert net.bias.requires_grad_(True) is net.bias and net.bias.requires_grad
    # the flag is informational: GradManager.attach decides which gradients are taken
    net.bias.requires_grad = False
    gm, opt = GradManager().attach(net.parameters()), optim.SGD(net.parameters(), lr=0.1)
    before = net.bias.numpy().copy()
    with gm:
        gm.backward(net(ht.tensor(X[0])).sum())
    opt.step().clear_grad()
    assert not np.array_equal(net.bias.numpy(), before)


# -- no_grad ------------------------------------------------------------------------------------


def test_no_grad_stops_gradients_eagerly_and_compiled():
    def step(x, net, gm):
        with gm:
            with torch.no_grad():
                frozen = net(x)  # a constant to the backward pass
            loss = (net(x) * frozen).sum()
            gm.backward(loss)
        return loss

    results = []
    for run in (step, xla_trace(step)):
        net = nn.Linear(3, 1)
        nn.init.ones_(net.weight)
        nn.init.zeros_(net.bias)
        gm = GradManager().attach(net.parameters())
        x = ht.tensor(np.array([[1.0, 2.0, 3.0]], np.float32))
        for _ in range(2):  # the second call of the compiled step runs the executable
            net.weight.grad = None
            run(x, net=net, gm=gm)
        results.append(net.weight.grad.numpy())
        assert not gm.recording
    # d/dw (w·x) * c with c = w·x held constant: c * x = 6 * x (with the product rule: 12 * x)
    for got in results:
        np.testing.assert_allclose(got, [[6.0, 12.0, 18.0]])


def test_no_grad_as_a_decorator_and_does_not_resume_an_ended_recording():
    net = nn.Linear(2, 1)
    gm = GradManager().attach(net.parameters())

    @torch.no_grad()
    def predict(x):
        return net(x)

    x = ht.tensor(np.ones((1, 2), np.float32))
    with gm:
        loss = predict(x).sum() + net(x).sum()
        with torch.no_grad():
            loss.backward()  # as PyTorch: backward inside no_grad works
    np.testing.assert_allclose(net.weight.grad.numpy(), [[1.0, 1.0]])
    assert not gm.recording and not ht.autodiff.TAPES


# -- loss.backward() ----------------------------------------------------------------------------


def _torch_style_step(x, y, net, opt, gm):
    with gm:
        loss = F.mse_loss(net(x), y)
        loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def _gm_style_step(x, y, net, opt, gm):
    with gm:
        loss = F.mse_loss(net(x), y)
        gm.backward(loss)
    opt.step().clear_grad()
    return loss


def _world():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    return net, optim.SGD(net.parameters(), lr=0.1, momentum=0.9), GradManager().attach(net.parameters())


@pytest.mark.parametrize("mode", ["eager", "xla_trace"])
def test_loss_backward_equals_gm_backward(mode):
    rng = np.random.default_rng(1)
    batches = [
        (rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 1)).astype(np.float32))
        for _ in range(3)
    ]
    finals = []
    for step in (_torch_style_step, _gm_style_step):
        net, opt, gm = _world()
        run = xla_trace(step) if mode == "xla_trace" else step
        losses = [float(run(ht.tensor(x), ht.tensor(y), net=net, opt=opt, gm=gm)) for x, y in batches]
        finals.append((losses, [p.numpy() for p in net.parameters()]))
        if mode == "xla_trace":
            assert run.cache_size == 1
    np.testing.assert_allclose(finals[0][0], finals[1][0], rtol=1e-6)
    for a, b in zip(finals[0][1], finals[1][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_loss_backward_with_a_partial_trace_forward():
    rng = np.random.default_rng(2)
    x, y = (ht.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((4, 3), (4, 1)))
    grads = []
    for traced in (False, True):
        net, _, gm = _world()
        forward = partial_trace(lambda x, net: net(x)) if traced else (lambda x, net: net(x))
        for _ in range(2):  # the second partial_trace call runs both executables
            for p in net.parameters():
                p.grad = None
            with gm:
                loss = ((forward(x, net) - y) ** 2).mean()
                loss.backward()
        grads.append([p.grad.numpy() for p in net.parameters()])
    for a, b in zip(*grads, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_loss_backward_without_one_recording_grad_manager_says_how():
    net, _, gm = _world()
    x = ht.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(
        HlotraceError, match=r"no GradManager is recording.*GradManager\(\)\.attach\(net\.parameters\(\)\)"
    ):
        net(x).sum().backward()
    other = GradManager().attach(net.parameters())
    with gm, other, pytest.raises(HlotraceError, match=r"2 GradManagers are recording.*gm\.backward"):
        net(x).sum().backward()
    with gm:
        with pytest.raises(HlotraceError, match=r"one-element loss only.*\(2, 1\)"):
            net(x).backward()
        net(x).backward(gradient=np.full((2, 1), 2.0, np.float32))  # as gm.backward(y, dy)
    np.testing.assert_allclose(net[2].bias.grad.numpy(), [4.0])
    with gm, pytest.raises(HlotraceError, match="create_graph"):
        net(x).sum().backward(create_graph=True)


# -- torch.optim, xla_trace's MegEngine arguments ---------------------------------------------


def test_zero_grad_set_to_none_or_zeros():
    net, _, gm = _world()
    opt = optim.Adam(net.parameters(), lr=1e-3)
    assert isinstance(opt, ht.optim.Adam)
    for set_to_none, expected in ((False, 0.0), (True, None)):
        with gm:
            net(ht.tensor(np.ones((1, 3), np.float32))).sum().backward()
        opt.zero_grad(set_to_none=set_to_none)
        grads = [p.grad for p in net.parameters()]
        assert all(g is None for g in grads) if expected is None else all((g.numpy() == 0).all() for g in grads)


def test_xla_trace_takes_megengines_without_host_and_symbolic_shape():
    step = xla_trace(without_host=True, symbolic_shape=False)(lambda x: x * 2)
    assert step(ht.tensor([1.0])).numpy().tolist() == [2.0]
    assert xla_trace(lambda x: x, without_host=True).fn is not None
    with pytest.raises(ArgumentError, match=r"xla_trace: without_host=False: expected True"):
        xla_trace(lambda x: x, without_host=False)
    with pytest.raises(ArgumentError, match=r"xla_trace: symbolic_shape=True: expected False"):
        xla_trace(symbolic_shape=True)
