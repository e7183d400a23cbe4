"""Tests for recagents.notebook: setup() seeding and the record()/read_records() round trip."""

import json
import random

import nbformat
import numpy as np
import pytest

from recagents.notebook import RECORD_MIME, read_records, record, setup

# ---------------------------------------------------------------- setup


def test_setup_makes_numpy_and_random_reproducible():
    setup(3)
    a = np.random.rand(5)
    r1 = random.random()
    setup(3)
    b = np.random.rand(5)
    r2 = random.random()
    np.testing.assert_array_equal(a, b)
    assert r1 == r2
    setup(4)
    assert not np.array_equal(np.random.rand(5), a)


def test_setup_seeds_torch_when_installed():
    torch = pytest.importorskip("torch")
    setup(3)
    a = torch.rand(3)
    setup(3)
    assert torch.equal(a, torch.rand(3))
    assert torch.get_num_threads() == 1  # the same sums in the same order on any machine


def test_setup_sets_pandas_float_format():
    import pandas as pd

    setup(0)
    setup(0)  # idempotent
    assert "0.1235" in repr(pd.DataFrame({"x": [0.123456789]}))


# ---------------------------------------------------------------- record outside a notebook


def test_record_outside_notebook_prints_text(capsys):
    record("ndcg@10", np.float64(0.5))
    assert capsys.readouterr().out.strip() == "ndcg@10 = 0.5"


@pytest.mark.parametrize(
    "value",
    [object(), {1: 2}, [1, object()], {"a": {"b": set()}}, np.array([object()], dtype=object)],
)
def test_record_rejects_unsupported_values(value):
    with pytest.raises(TypeError):
        record("bad", value)


def test_record_rejects_bad_name():
    with pytest.raises(TypeError):
        record("", 1)


def test_record_rejects_nan():
    with pytest.raises(ValueError):
        record("nan", float("nan"))


# ---------------------------------------------------------------- read_records


def test_read_records_missing_path(tmp_path):
    missing = tmp_path / "nope.ipynb"
    with pytest.raises(FileNotFoundError, match="nope.ipynb"):
        read_records(missing)


def _record_output(name, value):
    return nbformat.v4.new_output(
        "display_data",
        data={RECORD_MIME: {"name": name, "value": value}, "text/plain": f"{name} = {value}"},
    )


def test_read_records_later_overrides_earlier(tmp_path):
    nb = nbformat.v4.new_notebook()
    c1 = nbformat.v4.new_code_cell("record('x', 1)")
    c1.outputs = [_record_output("x", 1), _record_output("y", [1, 2])]
    c2 = nbformat.v4.new_code_cell("record('x', 2)")
    c2.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="noise\n"),
        _record_output("x", 2),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), c1, c2]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    records = read_records(path)
    assert records == {"x": 2, "y": [1, 2]}
    assert type(records["y"]) is list


# ---------------------------------------------------------------- executed round trip


@pytest.fixture
def kernel_name(tmp_path, monkeypatch):
    """A kernel spec for *this* interpreter, whatever specs are installed elsewhere.

    A spec named "python3" found on the Jupyter path may point at another Python (one
    without recagents). ipykernel writes a spec whose argv is sys.executable; putting it
    first on JUPYTER_PATH makes papermill use it, without installing anything.
    """
    from ipykernel.kernelspec import write_kernel_spec

    name = "recagents-test-python"
    write_kernel_spec(path=tmp_path / "jupyter" / "kernels" / name)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    return name


def test_record_round_trip_through_papermill(tmp_path, kernel_name):
    papermill = pytest.importorskip("papermill")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import numpy as np\nfrom recagents.notebook import record"),
        nbformat.v4.new_code_cell('record("ndcg@10", np.float64(0.5))'),
        nbformat.v4.new_code_cell('record("table", {"a": [1, 2]})'),
        nbformat.v4.new_code_cell('record("arr", np.arange(3))\nrecord("table", {"a": [3]})'),
    ]
    src, out = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, src)
    papermill.execute_notebook(
        str(src), str(out), kernel_name=kernel_name, progress_bar=False, cwd=str(tmp_path)
    )
    records = read_records(out)
    assert records == {"ndcg@10": 0.5, "table": {"a": [3]}, "arr": [0, 1, 2]}
    assert isinstance(records["ndcg@10"], float)

    # The executed notebook is valid nbformat and shows the text/plain fallback.
    executed = nbformat.read(out, as_version=4)
    nbformat.validate(executed)
    texts = [
        o["data"]["text/plain"]
        for c in executed.cells
        for o in c.get("outputs", [])
        if o.get("output_type") == "display_data"
    ]
    assert "ndcg@10 = 0.5" in texts
    assert json.loads(texts[1].split(" = ", 1)[1]) == {"a": [1, 2]}
