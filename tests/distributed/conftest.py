"""The distributed tests run on 8 CPU devices.

``HLOTRACE_CPU_DEVICES=8`` is set here, at collection, i.e. before any test of the session
runs, so hlotrace's own CPU client is made with 8 devices (under ``make test`` that holds
for every test of the worker: the other tests then run on device 0 of that client, which
they do not notice). If hlotrace's CPU client already exists when this file is imported
(something created it at import time, or the variable asked for another count), the
variable is left alone (changing it now would be an error) and the ``devices`` fixture
takes a separate 8-device CPU client from ``hlotrace.runtime.cpu_client(8)``: meshes are
built on its devices, SPMD executables compile on the client of their mesh's devices, and
one-device references keep running on hlotrace's own client.
"""

import os

import pytest

from hlotrace import runtime

NUM_DEVICES = 8

if "cpu" not in runtime._client_cache:
    os.environ.setdefault(runtime.CPU_DEVICES_ENV, str(NUM_DEVICES))


@pytest.fixture(scope="session")
def devices():
    """8 CPU devices: hlotrace's own client's when it has them, else a separate client's."""
    import hlotrace.distributed as dist

    own = dist.devices("cpu")
    if len(own) >= NUM_DEVICES:
        return own[:NUM_DEVICES]
    return list(runtime.cpu_client(NUM_DEVICES).local_devices())
