"""Devices, Mesh/P/NamedSharding values and their errors, placing tensors and modules."""

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.distributed as dist
from hlotrace import nn, runtime
from hlotrace.errors import HlotraceError


def test_hlotrace_cpu_devices_gives_the_cpu_client_that_many_devices(devices):
    assert len(devices) == 8
    assert len({d.id for d in devices}) == 8
    if runtime._cpu_devices_setting == ["8"]:
        assert len(dist.devices()) == 8


def test_changing_hlotrace_cpu_devices_after_the_client_exists_is_an_error(monkeypatch):
    dist.devices("cpu")  # the client exists now
    before = runtime._cpu_devices_setting[0]
    monkeypatch.setenv(runtime.CPU_DEVICES_ENV, "3" if before != "3" else "5")
    with pytest.raises(HlotraceError, match=r"HLOTRACE_CPU_DEVICES changed .* read once"):
        dist.devices("cpu")


def test_mesh_values_are_immutable_and_hashable(devices):
    a = dist.Mesh((4, 2), ("data", "model"), devices=devices)
    b = dist.Mesh((4, 2), ("data", "model"), devices=devices)
    assert a == b and hash(a) == hash(b) and a.size == 8 and a.axis_size("model") == 2
    assert dist.Mesh((2, 4), ("data", "model"), devices=devices) != a
    with pytest.raises(AttributeError):
        a.shape = (8,)
    s = dist.NamedSharding(a, dist.P("data", None))
    assert s == dist.NamedSharding(b, dist.P("data"))  # trailing dims are replicated either way
    assert {s: 1}[dist.NamedSharding(b, dist.P("data", None))] == 1
    assert dist.P("data", ("x", "y"), None).dims(4) == (("data",), ("x", "y"), (), ())


def test_a_mesh_larger_than_the_devices_says_how_many_exist_and_how_to_get_more(devices):
    with pytest.raises(HlotraceError, match=r"needs 16 devices.*only 8.*HLOTRACE_CPU_DEVICES"):
        dist.Mesh((16,), ("data",), devices=devices)
    with pytest.raises(HlotraceError, match=r"needs .* devices.*HLOTRACE_CPU_DEVICES"):
        dist.Mesh((len(dist.devices("cpu")) + 1,), ("data",))


@pytest.mark.parametrize(
    ("shape", "names", "match"),
    [
        ((2, 2), ("a", "a"), "repeated"),
        ((2,), ("a", "b"), "expected 1 axis name, one per axis"),
        ((0,), ("a",), "positive"),
        ((2,), ("",), "non-empty"),
    ],
)
def test_bad_meshes_are_one_clear_error(devices, shape, names, match):
    with pytest.raises(HlotraceError, match=match):
        dist.Mesh(shape, names, devices=devices[:4])


def test_bad_specs_are_one_clear_error(devices):
    mesh = dist.Mesh((4, 2), ("data", "model"), devices=devices)
    with pytest.raises(HlotraceError, match="unknown mesh axis 'batch'"):
        dist.NamedSharding(mesh, dist.P("batch"))
    with pytest.raises(HlotraceError, match="used twice"):
        dist.NamedSharding(mesh, dist.P("data", ("model", "data")))
    with pytest.raises(HlotraceError, match=r"P: entry=3: expected None, an axis name or a tuple"):
        dist.P(3)
    x = ht.tensor(np.zeros((8,), np.float32))
    with pytest.raises(HlotraceError, match=r"has 2 entries but .* rank 1"):
        dist.shard(x, mesh, dist.P("data", "model"))
    with pytest.raises(
        HlotraceError, match=r"size 6, which mesh axes \('data',\) \(together 4 devices\) do not divide"
    ):
        dist.shard(ht.tensor(np.zeros((6, 2), np.float32)), mesh, dist.P("data"))


def test_shard_lays_out_slices_and_numpy_gathers_the_global_value(devices):
    mesh = dist.Mesh((4, 2), ("data", "model"), devices=devices)
    value = np.arange(64, dtype=np.float32).reshape(8, 8)
    x = dist.shard(ht.tensor(value), mesh, dist.P("data", "model"))
    assert x.sharding == dist.NamedSharding(mesh, dist.P("data", "model"))
    shards = x._device.addressable_shards
    assert len(shards) == 8 and {s.data.shape for s in shards} == {(2, 4)}
    for s in shards:
        np.testing.assert_array_equal(np.asarray(s.data), value[s.index])
    x._host = None  # forget the host copy: numpy() must gather from the devices
    np.testing.assert_array_equal(x.numpy(), value)
    np.testing.assert_array_equal((x * 2).numpy(), value * 2)  # eager ops see the global value
    assert ht.tensor(value).sharding is None


def test_shard_replaces_a_parameter_in_place_and_other_tensors_by_a_new_one(devices):
    mesh = dist.Mesh((2,), ("data",), devices=devices[:2])
    p = ht.Parameter(np.ones((4, 2), np.float32))
    assert dist.shard(p, mesh, dist.P("data")) is p and p.sharding.spec == dist.P("data")
    t = ht.tensor(np.ones((4, 2), np.float32))
    u = dist.shard(t, mesh, dist.P("data"))
    assert u is not t and t.sharding is None and u.sharding.mesh == mesh


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)


def test_shard_module_places_by_fnmatch_pattern_and_replicates_the_rest(devices):
    mesh = dist.Mesh((2, 2), ("data", "model"), devices=devices[:4])
    net = Net()
    params = list(net.parameters())
    dist.shard_module(net, mesh, {"fc1.weight": dist.P("model", None), "*.bias": dist.P("data")})
    assert list(net.parameters()) == params
    specs = {n: p.sharding.spec for n, p in net.named_parameters()}
    assert specs == {
        "fc1.weight": dist.P("model", None),
        "fc1.bias": dist.P("data"),
        "fc2.weight": dist.P(),
        "fc2.bias": dist.P("data"),
    }


def test_constraint_outside_a_recording_is_an_error(devices):
    with pytest.raises(HlotraceError, match="only works inside a function being compiled"):
        dist.constraint(ht.tensor(np.zeros(4, np.float32)), dist.P("data"))


def test_a_scalar_is_placed_replicated_with_a_0_d_shard_per_device(devices):
    mesh = dist.Mesh((2,), ("data",), devices=devices[:2])
    s = dist.shard(ht.tensor(np.float32(3.5)), mesh, dist.P())
    assert [shard.data.shape for shard in s._device.addressable_shards] == [(), ()]
    assert s.numpy() == np.float32(3.5) and s.sharding == dist.NamedSharding(mesh, dist.P())


def test_a_mesh_shows_devices_as_a_reader_counts_them(devices):
    """One process: the device ids; several: ``p<process>:<index in that process>``, not
    XLA's global ids (2048 and up for a second process's CPU devices)."""
    from types import SimpleNamespace

    from hlotrace.distributed.mesh import describe_devices

    mesh = dist.Mesh((2,), ("data",), devices=devices[:2])
    assert repr(mesh) == "Mesh({'data': 2}, devices=[0, 1])"
    spread = [SimpleNamespace(id=i + 2048 * p, process_index=p, local_hardware_id=i) for p in (0, 1) for i in (0, 1)]
    assert describe_devices(spread) == "[p0:0, p0:1, p1:0, p1:1]"
    no_local = [SimpleNamespace(id=7, process_index=0, local_hardware_id=None), SimpleNamespace(id=9, process_index=1)]
    assert describe_devices(no_local) == "[p0:7, p1:9]"
