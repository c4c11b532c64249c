"""hlotrace.functional's public names, frozen: gathering the families' ``__all__`` by
iterating the ops package (not a hand list) must neither lose nor add a name."""

import hlotrace.functional as F

EXPECTED = """
    abs adaptive_avg_pool2d adaptive_avg_pool2d_backward adaptive_max_pool2d
    adaptive_max_pool2d_backward adaptive_max_pool2d_gather add all annotations any apply arange
    arctan argmax argmin argsort as_tensor astype atan2 avg_pool2d avg_pool2d_backward
    batch_norm batch_norm_inference binary_cross_entropy binary_cross_entropy_with_logits
    bitwise_and bitwise_not bitwise_or bitwise_xor broadcast_to cat ceil clip composite_error concat
    cond conv1d conv2d conv2d_weight_grad conv_transpose2d cos cosh cross_entropy cumprod cumsum
    div divide dropout elu embedding equal erf exp expand_dims expm1 eye flatten flip floor
    floor_div floor_divide fori_loop full full_like gather gelu get_op getitem getitem_transpose
    greater greater_equal group_norm huber_loss index_add index_copy invert isfinite isinf isnan
    kl_div l1_loss layer_norm leaky_relu left_shift less less_equal linear linspace log log1p
    log_softmax logical_and logical_not logical_or logical_xor logsumexp loss masked_fill matmul
    max max_pool2d max_pool2d_backward max_pool2d_gather maximum mean min minimum mish mod
    moveaxis moveaxis_last_to mse_loss mul multiply neg negative nll_loss nn normal normal_cdf
    not_equal one_hot ones ones_like optimization_barrier pad permutation pow power prod randint
    random_split reciprocal relu repeat reshape right_shift rms_norm roll round rsqrt
    scaled_dot_product_attention scan scatter_add scope setitem sigmoid sign silu sin sinh
    smooth_l1_loss softmax softplus sort sort_by_key split sqrt square squeeze stack std sub
    subtract sum swapaxes switch take take_along_axis tan tanh tile topk transpose tril triu
    uniform var where while_loop zeros zeros_like
    acos acosh asin asinh atanh hardsigmoid hardswish hsigmoid hswish logaddexp logsigmoid prelu relu6
""".split()  # the last line: issue 36's ops (MegEngine's XLA backend lowers them; two PyTorch names)


def test_functional_public_names_unchanged():
    names = sorted(n for n in dir(F) if not n.startswith("_"))
    assert sorted(set(names) - set(EXPECTED)) == [], "new public names in hlotrace.functional"
    assert sorted(set(EXPECTED) - set(names)) == [], "public names gone from hlotrace.functional"


# Family functions that hlotrace.functional wraps (thin wrappers over the family's function).
WRAPPED = {"pad": "hlotrace.nn_functional"}  # np.pad's widths or PyTorch's flat list


def test_every_family_all_is_exposed():
    from hlotrace.ops import FAMILY_MODULES

    for module in FAMILY_MODULES:
        for name in getattr(module, "__all__", ()):
            if name in WRAPPED:
                assert getattr(F, name).__module__ == WRAPPED[name], (module.__name__, name)
                continue
            assert getattr(F, name) is getattr(module, name), (module.__name__, name)
