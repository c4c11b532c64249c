"""Loss functions (hlotrace.losses, F.cross_entropy's options) and loss modules against NumPy
references, eagerly, compiled and differentiated; MegEngine's names (F.loss.*, F.nn.*,
F.neg/sub/..., clip(lower=, upper=))."""

import numpy as np
import pytest

import hlotrace as ht
from hlotrace import F, nn
from hlotrace.autodiff import grad
from hlotrace.errors import OpError
from hlotrace.jit import xla_trace


def _t(values, dtype="float32"):
    return ht.tensor(np.asarray(values, dtype=dtype))


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _np_cross_entropy(logits, labels, axis=-1, weight=None, ignore_index=-100, smoothing=0.0, reduction="mean"):
    """PyTorch's definition, written out per example with a loop (the reference)."""
    logp = np.moveaxis(_log_softmax(logits.astype(np.float64), axis), axis, -1)
    classes = logp.shape[-1]
    w = np.ones(classes) if weight is None else np.asarray(weight, np.float64)
    flat_logp, flat_labels = logp.reshape(-1, classes), labels.reshape(-1)
    losses, denominators = [], []
    for row, label in zip(flat_logp, flat_labels, strict=True):
        if label == ignore_index:
            losses.append(0.0)
            denominators.append(0.0)
            continue
        nll = -w[label] * row[label]
        smooth = -(w * row).sum() / classes
        losses.append((1 - smoothing) * nll + smoothing * smooth)
        denominators.append(w[label])
    losses = np.array(losses).reshape(labels.shape)
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / np.sum(denominators)


# -- cross_entropy and nll_loss --------------------------------------------------------------------
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_options_match_the_reference(reduction, weighted, smoothing):
    logits = _rand(4, 5, 3, seed=1)
    labels = np.random.default_rng(2).integers(0, 5, (4, 3)).astype(np.int32)
    labels[0, 1] = labels[2, 2] = -100  # ignored rows
    weight = np.array([0.5, 1.0, 2.0, 0.0, 1.5], np.float32) if weighted else None
    expected = _np_cross_entropy(logits, labels, 1, weight, -100, smoothing, reduction)

    def loss(x, y):
        return F.cross_entropy(x, y, axis=1, reduction=reduction, weight=weight, label_smoothing=smoothing)

    np.testing.assert_allclose(loss(ht.tensor(logits), ht.tensor(labels)).numpy(), expected, rtol=1e-5, atol=1e-6)
    compiled = xla_trace(loss)
    for _ in range(2):
        np.testing.assert_allclose(
            compiled(ht.tensor(logits), ht.tensor(labels)).numpy(), expected, rtol=1e-5, atol=1e-6
        )


def test_label_smoothing_zero_and_default_ignore_index_equal_the_plain_loss():
    logits, labels = _rand(6, 4, seed=3), np.array([0, 1, 2, 3, 1, 0], np.int32)
    plain = F.cross_entropy(ht.tensor(logits), ht.tensor(labels), ignore_index=None).numpy()
    assert F.cross_entropy(ht.tensor(logits), ht.tensor(labels), label_smoothing=0.0).numpy() == plain
    np.testing.assert_allclose(plain, -_log_softmax(logits, -1)[np.arange(6), labels].mean(), rtol=1e-6)
    ones = np.ones(4, np.float32)
    np.testing.assert_allclose(
        F.cross_entropy(ht.tensor(logits), ht.tensor(labels), weight=ones).numpy(), plain, rtol=1e-6
    )


def test_ignore_index_other_than_the_default_and_all_rows_ignored():
    logits, labels = _rand(4, 3, seed=4), np.array([0, 2, 0, 1], np.int32)
    got = F.cross_entropy(ht.tensor(logits), ht.tensor(labels), ignore_index=0).numpy()
    np.testing.assert_allclose(got, _np_cross_entropy(logits, labels, ignore_index=0), rtol=1e-6)
    assert np.isnan(F.cross_entropy(ht.tensor(logits), ht.tensor(np.full(4, -100, np.int32))).numpy())
    none = F.cross_entropy(ht.tensor(logits), ht.tensor(labels), ignore_index=0, reduction="none").numpy()
    assert none[0] == 0.0 and none[2] == 0.0 and none[1] > 0


def test_cross_entropy_gradient_leaves_ignored_rows_out():
    logits, labels = _rand(3, 4, seed=5), np.array([1, -100, 3], np.int32)
    g = grad(lambda x: F.cross_entropy(x, ht.tensor(labels)))(ht.tensor(logits)).numpy()
    probs = np.exp(_log_softmax(logits, -1))
    expected = (probs - np.eye(4)[[1, 0, 3]]) / 2
    expected[1] = 0.0
    np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-7)


def test_soft_targets_and_zero_size_batches():
    logits = _rand(5, 3, seed=6)
    probs = np.random.default_rng(7).dirichlet(np.ones(3), 5).astype(np.float32)
    expected = -(probs * _log_softmax(logits, -1)).sum(-1).mean()
    np.testing.assert_allclose(F.cross_entropy(ht.tensor(logits), ht.tensor(probs)).numpy(), expected, rtol=1e-5)
    smoothed = probs * 0.7 + 0.1
    expected = -(smoothed * _log_softmax(logits, -1)).sum(-1).mean()
    got = F.cross_entropy(ht.tensor(logits), ht.tensor(probs), label_smoothing=0.3).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    empty, no_labels = ht.tensor(np.zeros((0, 3), np.float32)), ht.tensor(np.zeros(0, np.int32))
    assert F.cross_entropy(empty, no_labels, reduction="none").shape == (0,)
    assert F.cross_entropy(empty, no_labels, reduction="sum").item() == 0.0
    assert np.isnan(F.cross_entropy(empty, no_labels).item())  # as PyTorch: 0 / 0


def test_nll_loss_of_log_softmax_is_cross_entropy():
    logits, labels = _rand(4, 6, seed=8), np.array([5, 0, -100, 2], np.int32)
    weight = np.linspace(0.5, 1.5, 6).astype(np.float32)
    got = F.nll_loss(F.log_softmax(ht.tensor(logits)), ht.tensor(labels), weight=weight).numpy()
    np.testing.assert_allclose(got, _np_cross_entropy(logits, labels, weight=weight), rtol=1e-6)
    loss_module = nn.NLLLoss(weight=weight)(F.log_softmax(ht.tensor(logits)), ht.tensor(labels))
    np.testing.assert_allclose(loss_module.numpy(), got, rtol=1e-7)


def test_cross_entropy_errors_name_the_problem():
    x, y = _t([[1.0, 2.0]]), _t([0], "int32")
    with pytest.raises(OpError, match=r"weight must have shape \(2,\)"):
        F.cross_entropy(x, y, weight=np.ones(3, np.float32))
    with pytest.raises(OpError, match=r"label_smoothing must be in \[0, 1\]"):
        F.cross_entropy(x, y, label_smoothing=1.5)
    with pytest.raises(OpError, match="nll_loss: labels must be integer"):
        F.nll_loss(x, _t([0.0]))
    with pytest.raises(OpError, match="kl_div: unknown reduction"):
        F.kl_div(x, x, reduction="avg")


# -- the other losses -------------------------------------------------------------------------------
def _pairs(seed=9):
    return _rand(3, 4, seed=seed), _rand(3, 4, seed=seed + 1)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses_match_numpy(reduction):
    pred, target = _pairs()
    pred[0, 0] = target[0, 0] + 0.999  # just inside the quadratic zone
    d = pred - target
    red = {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction]
    checks = [
        (F.l1_loss, {}, np.abs(d)),
        (F.smooth_l1_loss, {"beta": 0.5}, np.where(np.abs(d) < 0.5, 0.5 * d * d / 0.5, np.abs(d) - 0.25)),
        (F.smooth_l1_loss, {"beta": 0.0}, np.abs(d)),
        (F.huber_loss, {"delta": 1.5}, np.where(np.abs(d) <= 1.5, 0.5 * d * d, 1.5 * (np.abs(d) - 0.75))),
    ]
    for fn, kwargs, expected in checks:
        got = fn(ht.tensor(pred), ht.tensor(target), reduction=reduction, **kwargs).numpy()
        np.testing.assert_allclose(got, red(expected), rtol=1e-5, atol=1e-6, err_msg=fn.__name__)
    assert F.huber_loss(ht.tensor(pred), ht.tensor(target), delta=1.0).item() == pytest.approx(
        F.smooth_l1_loss(ht.tensor(pred), ht.tensor(target), beta=1.0).item(), rel=1e-6
    )


def test_smooth_l1_gradient_is_continuous_at_beta():
    g = grad(lambda x: F.smooth_l1_loss(x, _t([0.0, 0.0, 0.0]), reduction="sum", beta=1.0))(_t([0.5, 2.0, -3.0]))
    np.testing.assert_allclose(g.numpy(), [0.5, 1.0, -1.0])


def test_binary_cross_entropy_with_and_without_logits():
    logits = np.array([[-120.0, -3.0, 0.0, 2.5, 90.0]], np.float32)
    target = np.array([[0.0, 1.0, 0.5, 0.0, 1.0]], np.float32)
    x64 = logits.astype(np.float64)
    log_sig, log_not_sig = -np.logaddexp(0, -x64), -np.logaddexp(0, x64)
    expected = -(target * log_sig + (1 - target) * log_not_sig)
    got = F.binary_cross_entropy_with_logits(ht.tensor(logits), ht.tensor(target), reduction="none").numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    pos_weight = np.array([1.0, 3.0, 2.0, 1.0, 0.5], np.float32)
    expected_pw = -(pos_weight * target * log_sig + (1 - target) * log_not_sig)
    got = F.binary_cross_entropy_with_logits(
        ht.tensor(logits), ht.tensor(target), reduction="none", pos_weight=pos_weight
    )
    np.testing.assert_allclose(got.numpy(), expected_pw, rtol=1e-5, atol=1e-6)
    module = nn.BCEWithLogitsLoss(pos_weight=pos_weight, reduction="sum")
    np.testing.assert_allclose(module(ht.tensor(logits), ht.tensor(target)).numpy(), expected_pw.sum(), rtol=1e-5)
    probs = np.array([0.0, 0.2, 0.5, 0.9, 1.0], np.float32)
    target = np.array([1.0, 0.0, 1.0, 1.0, 1.0], np.float32)
    # PyTorch clamps each log at -100: p = 0 with target 1 costs exactly 100.
    with np.errstate(divide="ignore"):
        expected = -(target * np.maximum(np.log(probs), -100) + (1 - target) * np.maximum(np.log1p(-probs), -100))
    got = F.binary_cross_entropy(ht.tensor(probs), ht.tensor(target), reduction="none").numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    weight = np.array([1.0, 2.0, 0.0, 1.0, 1.0], np.float32)
    np.testing.assert_allclose(
        nn.BCELoss(weight=weight)(ht.tensor(probs), ht.tensor(target)).numpy(), (expected * weight).mean(), rtol=1e-6
    )


def test_bce_with_logits_gradient_is_sigmoid_minus_target():
    logits, target = _rand(2, 3, seed=11), (np.arange(6).reshape(2, 3) % 2).astype(np.float32)
    g = grad(lambda x: F.binary_cross_entropy_with_logits(x, ht.tensor(target), reduction="sum"))(ht.tensor(logits))
    np.testing.assert_allclose(g.numpy(), 1 / (1 + np.exp(-logits)) - target, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "batchmean", "none"])
def test_kl_div_matches_numpy_and_a_zero_target_contributes_zero(reduction):
    log_q = _log_softmax(_rand(2, 4, seed=12), -1)
    p = np.array([[0.0, 0.5, 0.25, 0.25], [0.1, 0.2, 0.3, 0.4]], np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        pointwise = np.where(p > 0, p * (np.log(p) - log_q), 0.0)
    expected = {"mean": pointwise.mean(), "sum": pointwise.sum(), "batchmean": pointwise.sum() / 2, "none": pointwise}
    got = F.kl_div(ht.tensor(log_q), ht.tensor(p), reduction=reduction).numpy()
    np.testing.assert_allclose(got, expected[reduction], rtol=1e-5, atol=1e-7)
    # log_target: the same divergence from log-probabilities (a -inf log target gives NaN, as PyTorch).
    positive = ht.tensor(np.log(p[1:]))
    got = F.kl_div(ht.tensor(log_q[1:]), positive, reduction="none", log_target=True).numpy()
    np.testing.assert_allclose(got, pointwise[1:], rtol=1e-5, atol=1e-7)
    g = grad(lambda t: F.kl_div(ht.tensor(log_q), t, reduction="sum"))(ht.tensor(p)).numpy()
    assert np.isfinite(g[0, 1:]).all()  # log(0) stays out of the gradient of the other entries
    np.testing.assert_allclose(g[1], np.log(p[1]) + 1 - log_q[1], rtol=1e-5)


# -- loss modules ------------------------------------------------------------------------------------
def test_loss_modules_use_class_dim_one_and_their_options():
    logits = _rand(2, 5, 3, seed=13)  # (N, C, d)
    labels = np.array([[0, 4, -100], [2, 2, 1]], np.int32)
    weight = np.arange(1, 6).astype(np.float32)
    module = nn.CrossEntropyLoss(weight=weight, label_smoothing=0.1)
    expected = _np_cross_entropy(logits, labels, 1, weight, -100, 0.1)
    np.testing.assert_allclose(module(ht.tensor(logits), ht.tensor(labels)).numpy(), expected, rtol=1e-5)
    assert [n for n, _ in module.named_buffers()] == ["weight"]
    pred, target = _pairs(14)
    cases = [
        (nn.MSELoss(), (pred - target) ** 2),
        (nn.L1Loss(reduction="sum"), np.abs(pred - target)),
        (
            nn.SmoothL1Loss(beta=2.0),
            np.where(np.abs(pred - target) < 2, (pred - target) ** 2 / 4, np.abs(pred - target) - 1),
        ),
        (
            nn.HuberLoss(delta=0.5),
            np.where(np.abs(pred - target) <= 0.5, (pred - target) ** 2 / 2, 0.5 * (np.abs(pred - target) - 0.25)),
        ),
    ]
    for module, pointwise in cases:
        expected = pointwise.sum() if module.reduction == "sum" else pointwise.mean()
        np.testing.assert_allclose(module(ht.tensor(pred), ht.tensor(target)).numpy(), expected, rtol=1e-5)
    log_q, p = _log_softmax(pred, -1), np.exp(_log_softmax(target, -1))
    kl = nn.KLDivLoss(reduction="batchmean")(ht.tensor(log_q), ht.tensor(p)).numpy()
    np.testing.assert_allclose(kl, (p * (np.log(p) - log_q)).sum() / 3, rtol=1e-5)


# -- MegEngine names ---------------------------------------------------------------------------------
def test_megengine_aliases_and_namespaces():
    x, y = _t([6.0, -7.0]), _t([4.0, 2.0])
    np.testing.assert_array_equal(F.neg(x).numpy(), [-6.0, 7.0])
    np.testing.assert_array_equal(F.sub(x, y).numpy(), [2.0, -9.0])
    np.testing.assert_array_equal(F.mul(x, y).numpy(), [24.0, -14.0])
    np.testing.assert_array_equal(F.div(x, y).numpy(), [1.5, -3.5])
    np.testing.assert_array_equal(F.pow(y, 2.0).numpy(), [16.0, 4.0])
    np.testing.assert_array_equal(F.floor_div(x, y).numpy(), [1.0, -4.0])
    np.testing.assert_array_equal(F.clip(x, lower=-1.0, upper=5.0).numpy(), [5.0, -1.0])
    np.testing.assert_array_equal(F.clip(x, upper=0.0).numpy(), [0.0, -7.0])
    with pytest.raises(TypeError, match="not both"):
        F.clip(x, 0.0, upper=1.0)
    assert F.nn.softmax is F.softmax and F.nn.linear is F.linear and "conv2d" in dir(F.nn)
    with pytest.raises(AttributeError, match="no function 'nope'"):
        F.nn.nope  # noqa: B018
    logits, labels = _rand(4, 3, seed=15), np.array([2, 0, 1, 1], np.int32)
    expected = _np_cross_entropy(logits, labels, axis=1, smoothing=0.1)
    got = F.loss.cross_entropy(ht.tensor(logits), ht.tensor(labels), label_smoothing=0.1)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)
    probs = np.exp(_log_softmax(logits, 1))
    got = F.loss.cross_entropy(ht.tensor(probs), ht.tensor(labels), with_logits=False)
    np.testing.assert_allclose(got.numpy(), _np_cross_entropy(logits, labels, axis=1), rtol=1e-5)
    target = np.array([0.0, 1.0, 1.0], np.float32)
    bce = F.loss.binary_cross_entropy(ht.tensor(logits[0]), ht.tensor(target)).numpy()
    np.testing.assert_allclose(bce, F.binary_cross_entropy_with_logits(ht.tensor(logits[0]), ht.tensor(target)).numpy())
    assert F.loss.square_loss(x, y).item() == pytest.approx(((6 - 4) ** 2 + 81) / 2)
