"""Neural-network modules (PyTorch/MegEngine style) and in-place initializers.

>>> import hlotrace as ht
>>> from hlotrace import nn
>>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
>>> [name for name, _ in net.named_parameters()]
['0.weight', '0.bias', '2.weight', '2.bias']
"""

from hlotrace.nn import (
    activation,
    attention,
    containers,
    conv,
    dropout,
    init,
    loss,
    normalization,
    pooling,
    resample,
    sparse,
    torch_checkpoint,
    transformer,
    utils,
)
from hlotrace.nn.activation import *  # noqa: F403
from hlotrace.nn.attention import *  # noqa: F403
from hlotrace.nn.containers import *  # noqa: F403
from hlotrace.nn.conv import *  # noqa: F403
from hlotrace.nn.dropout import *  # noqa: F403
from hlotrace.nn.layers import Flatten, Identity, Linear, ReLU, Sequential, Unflatten
from hlotrace.nn.loss import *  # noqa: F403
from hlotrace.nn.module import IncompatibleKeys, Module
from hlotrace.nn.normalization import *  # noqa: F403
from hlotrace.nn.pooling import *  # noqa: F403
from hlotrace.nn.resample import *  # noqa: F403
from hlotrace.nn.sparse import *  # noqa: F403
from hlotrace.nn.stacked import Stacked
from hlotrace.nn.torch_checkpoint import *  # noqa: F403
from hlotrace.nn.transformer import *  # noqa: F403

__all__ = [
    "Flatten",
    "Identity",
    "IncompatibleKeys",
    "Linear",
    "Module",
    "ReLU",
    "Sequential",
    "Stacked",
    "Unflatten",
    "init",
    "utils",
    *activation.__all__,
    *attention.__all__,
    *containers.__all__,
    *conv.__all__,
    *dropout.__all__,
    *loss.__all__,
    *normalization.__all__,
    *pooling.__all__,
    *resample.__all__,
    *sparse.__all__,
    *torch_checkpoint.__all__,
    *transformer.__all__,
]
