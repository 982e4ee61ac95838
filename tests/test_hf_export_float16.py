"""checkpoints.export --format hf --dtype float16: written under KERAS_BACKEND=jax with TensorFlow unimportable (as
on a GPU machine: the weights that come back from a window), every tensor the float32 export's rounded to half
precision, read back by checkpoints.import_weights (with TensorFlow) and by transformers; --dtype with another
format refused in one line."""
import json
import pathlib
import textwrap

import numpy as np
import pytest

from tests.checkpoint_fixtures import model_folder
from tests.helpers import run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
EXPORT_UNDER_JAX = textwrap.dedent('''
    import json, sys
    sys.modules["tensorflow"] = None  # the GPU image has none
    from checkpoints import export
    print("RESULTS" + json.dumps(export.main(["--model-dir", MODEL, "--format", "hf", "--dtype", "float16",
                                              "--output", OUT])))
''')


def tensors(folder):
    from safetensors.numpy import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.fixture(scope="module")
def exports(tmp_path_factory, tokenizer):
    """(model folder, float32 export, float16 export written under JAX without TensorFlow)."""
    from checkpoints import export

    root = tmp_path_factory.mktemp("hf16")
    folder = model_folder(root / "data", tokenizer).folder  # the tiny config, its weights moved off their init
    export.main(["--model-dir", str(folder), "--format", "hf", "--output", str(root / "hf32")])
    script = EXPORT_UNDER_JAX.replace("MODEL", repr(str(folder))).replace("OUT", repr(str(root / "hf16")))
    assert run_script_under_jax(script, REPO_ROOT) == ["discriminator", "generator"]
    return pathlib.Path(folder), root / "hf32", root / "hf16"


def test_every_tensor_is_the_float32_exports_in_half_precision(exports):
    _, hf32, hf16 = exports
    for tower in ("discriminator", "generator"):
        full, half = tensors(hf32 / tower), tensors(hf16 / tower)
        assert sorted(full) == sorted(half)
        for key, value in full.items():
            assert value.dtype == np.float32 and half[key].dtype == np.float16, key
            np.testing.assert_array_equal(half[key], value.astype(np.float16), err_msg=key)
        config = json.loads((hf16 / tower / "config.json").read_text())
        assert config["torch_dtype"] == "float16"
        assert config == {**json.loads((hf32 / tower / "config.json").read_text()), "torch_dtype": "float16"}
        assert 2 * sum(value.nbytes for value in half.values()) == sum(value.nbytes for value in full.values())


def test_import_weights_and_transformers_read_it_back(exports, tmp_path):
    import torch
    from transformers import ElectraForPreTraining

    from checkpoints import export, import_weights

    _, hf32, hf16 = exports
    import_weights.main(["--source", str(hf16), "--model-name", "back", "--data-dir", str(tmp_path)])
    export.main(["--model-dir", str(tmp_path / "models" / "back"), "--format", "hf", "--output", str(tmp_path / "again")])
    for tower in ("discriminator", "generator"):  # float16 -> our float32 checkpoint -> float32 export: exact
        again, half = tensors(tmp_path / "again" / tower), tensors(hf16 / tower)
        for key, value in half.items():
            np.testing.assert_array_equal(again[key], value.astype(np.float32), err_msg=key)
    ids = torch.tensor([[1, 7, 9, 11, 2]])
    logits = {}
    for name, folder in (("full", hf32), ("half", hf16)):
        model = ElectraForPreTraining.from_pretrained(str(folder / "discriminator"), torch_dtype=torch.float32).eval()
        with torch.no_grad():
            logits[name] = model(input_ids=ids).logits.numpy()
    np.testing.assert_allclose(logits["half"], logits["full"], atol=2e-2)
    assert not np.array_equal(logits["half"], logits["full"])  # rounded weights, not a float32 copy


def test_dtype_with_another_format_is_one_line(exports, tmp_path, capsys):
    from checkpoints import export

    folder, _, _ = exports
    with pytest.raises(SystemExit) as stop:
        export.main(["--model-dir", str(folder), "--format", "tf1", "--dtype", "float16", "--output",
                     str(tmp_path / "tf1")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--dtype float16 is for --format hf; --format tf1 writes float32") and "\n" not in err
    assert not (tmp_path / "tf1").exists()
