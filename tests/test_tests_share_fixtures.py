"""Tests share what they need through conftest.py and the helper modules beside it (helpers.py,
model_fixtures.py, checkpoint_fixtures.py, finetune_fixtures.py, corpus_fixtures.py, study_fixtures.py):
no file under tests/ imports a test module, neither itself nor in the scripts it runs in another process
(a Python string holding imports). Read from the source with ast: nothing is imported here."""
import ast
import pathlib
import textwrap

TESTS = pathlib.Path(__file__).resolve().parent


def is_test_module(dotted):
    """tests.test_x, test_x (a name a file in tests/ could import when tests/ is on the path), or below."""
    parts = dotted.split(".")
    if parts[0] == "tests":
        parts = parts[1:]
    return bool(parts) and parts[0].startswith("test_")


def imported_test_modules(tree):
    """(line, name) of every import of a test module in the tree, at any depth. A relative import is
    relative to tests/: `from .test_x import y` and `from . import test_x` name test_x."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base] * bool(base) + [f"{base}.{a.name}" if base else a.name for a in node.names]
        else:
            continue
        named = [name for name in names if is_test_module(name)]
        if named:
            yield node.lineno, named[0]


def offenders(source):
    """(line, name) of the test-module imports in a file's source and in the scripts its strings hold."""
    tree = ast.parse(source)
    found = list(imported_test_modules(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import" in node.value:
            try:
                script = ast.parse(textwrap.dedent(node.value))
            except SyntaxError:
                continue
            found += [(node.lineno + line - 1, name) for line, name in imported_test_modules(script)]
    return found


def test_the_check_sees_every_way_of_importing_a_test_module():
    # {t} stands for "test_", so that these examples are no imports of this file's own
    bad = ["from tests.{t}pretrainer import max_abs", "import tests.{t}pretrainer", "import {t}pretrainer",
           "from tests import {t}pretrainer", "from .{t}pretrainer import max_abs", "from . import {t}x",
           "def f():\n    from tests.{t}x import y", 'SCRIPT = """\nimport json\nfrom tests.{t}x import y\n"""',
           "SCRIPT = '''\n    import json\n    from tests.{t}x import y\n'''"]
    assert [source for source in bad if not offenders(source.format(t="test_"))] == []
    good = ["from tests.helpers import write_rte", "from tests.model_fixtures import tiny_config",
            "from tests import helpers", "import tests.conftest", "from tests.helpers import {t}thing",
            'TEXT = "tests/{t}pretrainer.py imports"']
    assert [source for source in good if offenders(source.format(t="test_"))] == []


def test_no_test_module_imports_a_test_module():
    files = sorted(TESTS.rglob("*.py"))
    assert len([f for f in files if f.name.startswith("test_")]) > 50  # the walk found the suite
    found = [f"{path.relative_to(TESTS.parent)}:{line} imports {name}"
             for path in files for line, name in offenders(path.read_text(encoding="utf-8"))]
    assert found == [], "share it through tests/conftest.py or a helper module beside it:\n" + "\n".join(found)
