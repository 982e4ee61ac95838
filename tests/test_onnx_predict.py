"""python -m inference.predict on a --format onnx export folder: the same JSON lines as on the fine-tuned
folder it came from (labels, probabilities within 1e-4, regression scores, QA answers), in input order;
a damaged model.onnx stops with one line naming it (exit 2) and nothing written. Tagging's parity is the
real-data tier's (tests/test_onnx_clients.py, CoNLL-2000): one export fewer here."""
import io
import json

import pytest

from tests.checkpoint_fixtures import assert_one_line_exit_2
from tests.onnx_fixtures import SENTENCES, exported_folders

KINDS = ("classification", "regression", "span")
ROWS = SENTENCES[:-1] * 3  # 15 rows of several lengths, batched by 4: sorting by length reorders them


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{kind: (fine-tuned folder, its ONNX export)}."""
    return exported_folders(tmp_path_factory.mktemp("onnx_predict"), KINDS)


def predict_lines(model_dir, input_path):
    from inference import predict

    stdout = io.StringIO()
    predict.main(["--model-dir", str(model_dir), str(input_path), "--batch-size", "4"], stdout=stdout)
    return [json.loads(line) for line in stdout.getvalue().splitlines()]


def write_rows(path, kind):
    if kind == "regression":
        rows = [{"sentence1": a, "sentence2": b} for a, b in zip(ROWS, reversed(ROWS))]
    elif kind == "span":
        rows = [{"question": a, "context": f"{b} and {a} , the plot"} for a, b in zip(ROWS, reversed(ROWS))]
    else:
        rows = [{"sentence": text} for text in ROWS]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def assert_same(ours, theirs, tolerance=1e-4):
    """Equal JSON values, floats within `tolerance`."""
    if isinstance(ours, dict):
        assert sorted(ours) == sorted(theirs)
        for key in ours:
            assert_same(ours[key], theirs[key], tolerance)
    elif isinstance(ours, list):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b, tolerance)
    elif isinstance(ours, float) and isinstance(theirs, float):
        assert abs(ours - theirs) <= tolerance, (ours, theirs)
    else:
        assert ours == theirs


@pytest.mark.parametrize("kind", KINDS)
def test_the_export_predicts_as_the_fine_tuned_folder(folders, kind, tmp_path):
    folder, onnx_folder = folders[kind]
    rows = write_rows(tmp_path / "rows.jsonl", kind)
    expected, served = predict_lines(folder, rows), predict_lines(onnx_folder, rows)
    assert [line["line"] for line in served] == list(range(1, len(ROWS) + 1))
    assert_same(expected, served)
    if kind == "classification":
        assert len({round(line["probabilities"]["1"], 4) for line in served}) >= len(SENTENCES) - 1


def test_a_damaged_model_onnx(folders, tmp_path, capsys):
    import shutil

    from inference import predict

    damaged = shutil.copytree(folders["classification"][1], tmp_path / "damaged")
    data = (damaged / "model.onnx").read_bytes()
    (damaged / "model.onnx").write_bytes(data[:len(data) // 3])
    rows = write_rows(tmp_path / "rows.jsonl", "classification")
    output = tmp_path / "out.jsonl"
    assert_one_line_exit_2(predict.main, ["--model-dir", damaged, rows, "--output", output], capsys,
                           f"{damaged / 'model.onnx'}: not a loadable ONNX model", "--format onnx")
    assert not output.exists() and not list(tmp_path.glob("out.jsonl*"))
