"""training_jax speaks the product's words (an export, a model, a run): no "study" or "arm" in its options,
file names or public names, but for the old export files it still reads (study.json, "arms"), so that exports
from before still work; the old options --study and --arm are gone (refused as unknown). Pure Python: nothing is
compiled."""
import ast
import json
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
STUDY_WORDS = re.compile(r"study|(?<![a-z])arms?(?![a-z])", re.IGNORECASE)
# The only places the old words may stay: the accepted aliases and the old-format readers, by file and text.
ALLOWED = {("export_file.py", "study.json"), ("export_file.py", "arms")}


def docstrings(tree):
    """The docstring nodes of a module, its classes and functions (prose, not names: left out of the scan)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def names_and_strings(tree):
    """(kind, text) of every identifier (defined, assigned, read, attribute, argument, keyword, import) and
    every string literal but docstrings, f-strings' literal parts included."""
    skip = docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            yield "string", node.value
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield "name", node.name
        elif isinstance(node, ast.Name):
            yield "name", node.id
        elif isinstance(node, ast.Attribute):
            yield "name", node.attr
        elif isinstance(node, ast.arg):
            yield "name", node.arg
        elif isinstance(node, ast.keyword) and node.arg:
            yield "name", node.arg
        elif isinstance(node, ast.alias):
            yield "name", node.asname or node.name


def words_found(path):
    """[(kind, text)] in the file that contain "study" or "arm"/"arms" as a word (not "warmup"), as written in
    names (snake_case parts) or strings."""
    found = []
    for kind, text in names_and_strings(ast.parse(path.read_text())):
        spaced = text.replace("_", " ") if kind == "name" else text
        if STUDY_WORDS.search(spaced) and (path.name, text) not in ALLOWED:
            found.append((kind, text))
    return found


def test_the_scan_finds_the_old_words_where_they_are():
    tree = ast.parse('def arm_steps(study_dir):\n    """an arm\'s study"""\n    return {"arms": f"--arm {study_dir}"}\n'
                     'warmup_steps = 1\n')
    found = [(kind, text) for kind, text in names_and_strings(tree)
             if STUDY_WORDS.search(text.replace("_", " ") if kind == "name" else text)]
    assert sorted(found) == [("name", "arm_steps"), ("name", "study_dir"), ("name", "study_dir"),
                             ("string", "--arm "), ("string", "arms")]


def test_training_jax_has_no_study_or_arm_in_its_options_files_or_names():
    files = sorted((REPO / "training_jax").glob("*.py"))
    assert len(files) > 5
    found = {path.name: words_found(path) for path in files}
    assert {name: words for name, words in found.items() if words} == {}


def test_the_old_options_are_gone(capsys):
    from studies.device_path import import_jax
    from studies.device_path import pretrain_export as pretrain

    new = pretrain.parse_args(["--export", "e", "--model", "m", "--out", "o"])
    assert (new.export, new.model) == (pathlib.Path("e"), "m")
    for parse, old in ((pretrain.parse_args, ["--study", "e", "--arm", "m", "--out", "o"]),
                       (import_jax.parse_args, ["--weights", "w", "--model-name", "n", "--arm", "m"])):
        with pytest.raises(SystemExit) as stopped:
            parse(old)
        assert stopped.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        pretrain.parse_args(["--help"])
    shown = capsys.readouterr().out
    assert "--export" in shown and "--model" in shown and "--study" not in shown and "--arm " not in shown
    with pytest.raises(SystemExit) as stopped:
        pretrain.parse_args(["--out", "o", "--model", "m"])
    assert stopped.value.code == 2 and "required: --export" in capsys.readouterr().err


def test_an_old_export_reads_as_a_new_one(tmp_path):
    from common.errors import InputError
    from studies.device_path import export_file

    record = {"log_every": 1, "eval_every": {"electra": 2}, "models": {"electra": {"config_file": "c.json"}},
              "fit": {"models": ["electra"], "budgets": 2}}
    old = json.loads(json.dumps(record).replace('"models"', '"arms"'))
    for name in ("old", "new"):
        (tmp_path / name).mkdir()
    (tmp_path / "old" / "study.json").write_text(json.dumps(old))
    export_file.write_export_file(tmp_path / "new", record)
    assert json.loads((tmp_path / "new" / "export.json").read_text()) == record
    assert export_file.read_export_file(tmp_path / "old") == export_file.read_export_file(tmp_path / "new") == record
    export_file.write_export_file(tmp_path / "old", record)  # written again: export.json is read first
    assert export_file.export_path(tmp_path / "old").name == "export.json"
    with pytest.raises(InputError, match=r"none/export\.json: missing; export it"):
        export_file.read_export_file(tmp_path / "none", "export it")
