"""The product's packages import each other in one direction: no import cycle among packages or modules
(imports inside functions count too: they run, and a loop through them is still a loop), nothing in the
product imports the benchmarks, the studies or the tests, and the storage layer sits below its users.
Read from the source with ast: nothing is imported here."""
import ast
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
PRODUCT = ("common", "configs", "data", "model", "pretrain", "storage", "training", "training_jax", "finetune",
           "checkpoints", "inference", "build_pretraining_dataset", "run_pretraining", "run_finetuning")
NOT_PRODUCT = ("bench", "studies", "tests")
# What each of these may not import (a package, or a module and what is under it): the storage layer is
# below every user of a model folder, and the packages that use a folder reach it through storage/, not
# through a training loop. Predictions (inference.predict) read a fine-tuned folder and build its inputs
# with finetune's reader, heads and featurisation, so that they are fine-tuning's own; its loop stays out.
FINETUNE_TRAINING = ("finetune.loop", "finetune.trials", "finetune.tf_trainer", "finetune.losses", "run_finetuning")
BELOW = {"storage": ("training", "training_jax", "finetune", "checkpoints", "inference"),
         "finetune": ("training", "inference"), "checkpoints": ("training", "inference"),
         "inference": ("training", "checkpoints") + FINETUNE_TRAINING}


def module_files():
    """{dotted module name: path} of every product module (a package's __init__ under the package's name)."""
    modules = {}
    for top in PRODUCT:
        script = REPO_ROOT / f"{top}.py"
        paths = [script] if script.is_file() else sorted((REPO_ROOT / top).rglob("*.py"))
        for path in paths:
            parts = path.relative_to(REPO_ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_names(path):
    """(line, dotted name) of every absolute import in the file, at any depth; `from a import b` gives a.b."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)


def import_graph():
    """{module: {imported product module: line}}, each name resolved to the longest module it names."""
    modules = module_files()
    graph = {}
    for name, path in modules.items():
        edges = graph.setdefault(name, {})
        for line, target in imported_names(path):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                edges.setdefault(target, line)
    return graph


def cycles(graph):
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def package(module):
    return module.split(".")[0]


def test_no_import_cycle_among_product_modules_or_packages():
    graph = import_graph()
    assert len(graph) > 100  # the walk found the product
    assert cycles(graph) == []
    packages = {}
    for module, edges in graph.items():
        packages.setdefault(package(module), set()).update(package(t) for t in edges if package(t) != package(module))
    assert cycles(packages) == []


def test_the_product_imports_no_benchmark_study_or_test_and_storage_sits_below_its_users():
    modules = module_files()
    offenders = []
    for name, path in modules.items():
        forbidden = NOT_PRODUCT + BELOW.get(package(name), ())
        for line, target in imported_names(path):
            if any(target == f or target.startswith(f + ".") for f in forbidden):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{line} imports {target}")
    assert offenders == []
