"""Trace recording, its text form and the JSON(+npz) round trip."""

import json

import numpy as np
import pytest

import hlotrace as ht
import hlotrace.functional as F
from hlotrace.errors import TraceError
from hlotrace.jit import xla_trace
from hlotrace.lowering import lower_trace
from hlotrace.trace import SCHEMA_VERSION, Trace


def _recorded():
    table = ht.tensor(np.linspace(-1, 1, 12).astype("float32").reshape(3, 4))

    @xla_trace(capture_as_const=True)
    def f(x, y):
        z = F.where(x > 0.5, x, y.astype("float32")) * table
        return F.sum(z, axis=-1, keepdims=True) + float("inf"), z[::-1, 1:3]

    f(ht.tensor(np.ones((3, 4), "float32")), ht.tensor(np.arange(4, dtype=np.int32)))
    return f


def test_records_name_op_attrs_vars_and_locations():
    trace = _recorded().trace
    ops = [r.op for r in trace.records]
    assert ops[:4] == ["greater", "astype", "where", "multiply"]
    assert all(r.location is not None and r.location.file.endswith("test_trace.py") for r in trace.records)
    sum_record = next(r for r in trace.records if r.op == "sum")
    assert sum_record.attrs == {"axis": (1,), "keepdims": True}
    assert len(trace.inputs) == 2 and len(trace.outputs) == 2
    assert "sum(" in str(trace)


def test_json_round_trip_is_identical_and_lowers_the_same(tmp_path):
    trace = _recorded().trace
    path = tmp_path / "f.trace.json"
    trace.save(path)
    assert (tmp_path / "f.trace.json.npz").exists()  # the (3,4) captured table
    loaded = Trace.load(path)
    assert loaded.records == trace.records
    assert loaded.vars == trace.vars
    assert loaded.inputs == trace.inputs and loaded.outputs == trace.outputs
    assert set(loaded.constants) == set(trace.constants)
    for k, v in trace.constants.items():
        np.testing.assert_array_equal(loaded.constants[k], v)
        assert loaded.constants[k].dtype == v.dtype
    assert lower_trace(loaded).text() == lower_trace(trace).text()


def test_json_document_is_versioned():
    doc, _ = _recorded().trace.to_json()
    assert doc["schema"] == "hlotrace.trace" and doc["version"] == SCHEMA_VERSION
    json.dumps(doc)  # plain JSON types only


def test_bfloat16_and_bool_constants_round_trip(tmp_path):
    bf = ht.tensor(np.array([1.5, -0.0, np.inf], "float32"), dtype="bfloat16")
    mask = ht.tensor(np.array([True, False, True]))

    @xla_trace(capture_as_const=True)
    def f(x):
        return F.where(mask, x + bf, x)

    f(ht.tensor(np.zeros(3, "float32"), dtype="bfloat16"))
    f.trace.save(tmp_path / "t.json")
    loaded = Trace.load(tmp_path / "t.json")
    for k, v in f.trace.constants.items():
        assert loaded.constants[k].dtype == v.dtype
        np.testing.assert_array_equal(loaded.constants[k].astype("float32"), v.astype("float32"))


def test_loading_a_foreign_or_newer_file_is_a_clear_error(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"schema": "something else"}))
    with pytest.raises(TraceError, match="not an hlotrace trace"):
        Trace.load(path)
    path.write_text(json.dumps({"schema": "hlotrace.trace", "version": 999}))
    with pytest.raises(TraceError, match="version 999"):
        Trace.load(path)
    path.write_text("{not json")
    with pytest.raises(TraceError, match="cannot read trace"):
        Trace.load(path)


def test_dtype_attributes_round_trip(tmp_path):
    # Regression: {"dtype": float32} attrs were once read back as a dtype marker and failed.
    @xla_trace
    def f(x):
        return F.astype(x, "bfloat16")

    f(ht.tensor(np.ones(2, "float32")))
    f.trace.save(tmp_path / "astype.json")
    loaded = Trace.load(tmp_path / "astype.json")
    assert loaded.records == f.trace.records
