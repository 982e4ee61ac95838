"""bench/ measures speed and imports no study; the product imports neither bench nor studies; every study's
command answers --help, and the two that read committed files print their README's rows again."""
import ast
import pathlib
import runpy
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
STUDY_COMMANDS = ("studies.rtd_vs_mlm", "studies.electric", "studies.electric.synthetic",
                  "studies.disc_auc_reference", "studies.device_curves", "studies.tf_vs_jax_curves",
                  "studies.batch_diversity", "studies.anisotropy")


def top_level_imports(path):
    """The first component of every module `path` imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_bench_measures_speed_only():
    sources = sorted((REPO / "bench").rglob("*.py"))
    worded = [f"{p.relative_to(REPO)}: {word}" for p in sources for word in ("electric", "rtd_vs_mlm", "study")
              if word in p.read_text(encoding="utf-8")]
    assert not worded, worded
    assert not [p for p in sources if "studies" in top_level_imports(p)]


def test_the_product_imports_neither_bench_nor_studies():
    packages = [p for p in REPO.iterdir() if (p / "__init__.py").is_file() and p.name not in ("bench", "studies", "tests")]
    sources = sorted([*REPO.glob("*.py"), *(path for package in packages for path in package.rglob("*.py"))])
    offenders = [f"{p.relative_to(REPO)}" for p in sources if top_level_imports(p) & {"bench", "studies"}]
    assert not offenders, offenders
    assert {"model", "pretrain", "training", "training_jax", "finetune", "data", "checkpoints"} <= {p.name for p in packages}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # runpy: a module run again after its package imported it
@pytest.mark.parametrize("module", STUDY_COMMANDS)
def test_every_study_command_answers_help(module, monkeypatch, capsys):
    """`python -m <module> --help`, in this process: the README's command parses its flags."""
    monkeypatch.setattr(sys, "argv", [module, "--help"])
    with pytest.raises(SystemExit) as stopped:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    assert stopped.value.code == 0
    assert "usage: " in capsys.readouterr().out


def readme_rows(study, starts):
    return [line for line in (REPO / "studies" / study / "README.md").read_text(encoding="utf-8").splitlines()
            if line.startswith(starts)]


def test_the_device_curves_readme_table_comes_from_its_files(tmp_path, capsys):
    from studies import device_curves

    device_curves.main([str(REPO / "studies" / "device_curves" / "h100_probe"), "--out", str(tmp_path / "c.png")])
    printed = capsys.readouterr().out.replace("| electra |", "| ELECTRA |").replace("| mlm |", "| MLM only |")
    rows = readme_rows("device_curves", ("| ELECTRA |", "| MLM only |"))
    assert len(rows) == 10 and all(row in printed for row in rows)


def test_the_tf_vs_jax_readme_table_comes_from_the_stored_curves(tmp_path, capsys):
    """The TensorFlow run kept as curves.json (no event files) gives the README's table."""
    from studies import tf_vs_jax_curves

    tf_vs_jax_curves.main(["--tf-model-dir", str(REPO / "studies" / "rtd_vs_mlm" / "results" / "cpu_tf_electra"),
                           "--jax-run", str(REPO / "studies" / "device_curves" / "h100_probe" / "electra"),
                           "--out", str(tmp_path / "c.png"), "--every", "500"])
    printed = capsys.readouterr().out
    rows = readme_rows("tf_vs_jax_curves", ("| training", "| held-out"))
    assert len(rows) == 6 and all(row in printed for row in rows)
