"""The product's source files, for the tests that read the source with ast (tests/test_import_layers.py,
tests/test_no_autograph.py)."""
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
PRODUCT = ("common", "configs", "data", "model", "pretrain", "pretrain_loop", "storage", "training", "training_jax",
           "finetune", "checkpoints", "inference", "build_pretraining_dataset", "run_pretraining", "run_finetuning")


def module_files(tops=PRODUCT):
    """{dotted module name: path} of every module under `tops` (a package's __init__ under the package's name)."""
    modules = {}
    for top in tops:
        script = REPO_ROOT / f"{top}.py"
        paths = [script] if script.is_file() else sorted((REPO_ROOT / top).rglob("*.py"))
        for path in paths:
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules
