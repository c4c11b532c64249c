"""Neural-network modules (PyTorch/MegEngine style) and in-place initializers.

>>> import hlotrace as ht
>>> from hlotrace import nn
>>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
>>> [name for name, _ in net.named_parameters()]
['0.weight', '0.bias', '2.weight', '2.bias']
"""

from hlotrace.nn import init
from hlotrace.nn.layers import Identity, Linear, ReLU, Sequential
from hlotrace.nn.module import IncompatibleKeys, Module

__all__ = ["Identity", "IncompatibleKeys", "Linear", "Module", "ReLU", "Sequential", "init"]
