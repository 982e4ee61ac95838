"""The product's packages import each other in one direction: no import cycle among packages or modules,
nor among the studies' and benchmarks' (imports inside functions count too: they run, and a loop through
them is still a loop), nothing in the product imports the benchmarks, the studies or the tests, the storage
layer sits below its users, builds no model and exports only what they call, configs/ stands on common/
and data/ alone, and the JAX trainer does not reach into the TensorFlow one. Read from the source with ast:
nothing is imported here."""
import ast
import functools
import re

from tests.source_tree import PRODUCT, REPO_ROOT, module_files

NOT_PRODUCT = ("bench", "studies", "tests")
# What each of these may not import (a package, or a module and what is under it): the storage layer is
# below every user of a model folder, and the packages that use a folder reach it through storage/, not
# through a training loop. Predictions (inference.predict) read a fine-tuned folder and build its inputs
# with finetune's reader, heads and featurisation, so that they are fine-tuning's own; its loop stays out.
FINETUNE_TRAINING = ("finetune.loop", "finetune.trials", "finetune.tf_trainer", "finetune.losses", "run_finetuning")
# storage/ reads and writes folders and restores weights into a model it is given: building one is
# pretrain.loaded_folder's job, so storage imports neither model/ nor pretrain/.
BELOW = {"storage": ("model", "pretrain", "training", "training_jax", "finetune", "checkpoints", "inference"),
         "finetune": ("training", "inference"), "checkpoints": ("training", "inference"),
         "inference": ("training", "checkpoints") + FINETUNE_TRAINING, "training_jax": ("training",)}
# The only product packages these may import: a run's settings sit below everything that reads them.
# pretrain_loop is the loop both trainers share: below training/ and training_jax/ (tests/test_pretrain_loop.py
# also checks that it imports no backend).
ONLY = {"configs": ("common", "data"), "pretrain_loop": ("common", "data")}


@functools.lru_cache(maxsize=None)
def imported_names(path):
    """(line, dotted name) of every absolute import in the file, at any depth; `from a import b` gives a.b.
    Cached: every test here walks the same files."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return tuple(names)


def import_graph(tops=PRODUCT):
    """{module: {imported module under `tops`: line}}, each name resolved to the longest module it names."""
    modules = module_files(tops)
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


def test_the_benchmarks_import_no_study():
    """Benchmarks measure the product; the studies may use them (the FLOP count, the window's benchmark), not the
    other way (studies/README.md), so a study's code moving never breaks a benchmark."""
    offenders = [f"{path.relative_to(REPO_ROOT)}:{line} imports {target}"
                 for path in sorted((REPO_ROOT / "bench").glob("*.py"))
                 for line, target in imported_names(path) if target == "studies" or target.startswith("studies.")]
    assert offenders == []


def test_no_import_cycle_among_the_studies_benchmarks_and_tests():
    graph = import_graph(PRODUCT + NOT_PRODUCT)
    assert any(package(module) == "studies" for module in graph)  # the walk found the studies
    assert cycles(graph) == []


def test_configs_imports_only_the_packages_below_it():
    graph = import_graph()
    offenders = [f"{module} imports {target}" for module, edges in graph.items() if package(module) in ONLY
                 for target in edges if package(target) not in ONLY[package(module)] + (package(module),)]
    assert any(package(module) == "configs" for module in graph)
    assert offenders == []


def test_storage_exports_what_its_users_call_and_keeps_the_rest_to_itself():
    path = REPO_ROOT / "storage" / "model_folder.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exported = next(ast.literal_eval(node.value) for node in tree.body
                    if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__all__")
    defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    defined |= {target.id for node in tree.body if isinstance(node, ast.Assign)
                for target in node.targets if isinstance(target, ast.Name) and target.id != "__all__"}
    assert set(exported) <= defined
    own = {name for name in defined - set(exported) if not name.startswith("_")}
    others = [p for p in module_files(PRODUCT + NOT_PRODUCT).values() if p != path]
    used = {name for other in others for name in own if re.search(rf"\b{name}\b", other.read_text(encoding="utf-8"))}
    assert own and used == set()
