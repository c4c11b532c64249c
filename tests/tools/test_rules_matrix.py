"""``hlotrace rules --matrix``: op x dtype (probed with each op's inference) x platform."""

import json

from hlotrace.tools.cli import main


def test_the_matrix_follows_the_registries(capsys):
    assert main(["rules", "--matrix", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {r["op"]: r for r in report["ops"]}
    assert report["dtypes"] == ["i1", "i32", "i64", "f16", "bf16", "f32", "f64"]
    assert rows["add"]["dtypes"]["f32"] == {"cpu": "tested", "cuda": "rule"}
    assert "f32" not in rows["bitwise_and"]["dtypes"]  # its inference refuses floats
    assert rows["bitwise_and"]["dtypes"]["i32"]["cpu"] == "tested"
    assert all(cell["cuda"] != "tested" for r in rows.values() for cell in r["dtypes"].values())


def test_the_table(capsys):
    assert main(["rules", "--matrix"]) == 0
    out = capsys.readouterr().out
    first = next(line for line in out.splitlines() if line.startswith("add "))
    assert first.split()[1:] == ["Tr"] * 7 or "Tr" in first
    assert "T: rule and generated property test" in out
