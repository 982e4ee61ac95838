"""The one place that lists the task modules: each exposes TASKS, a list of Task instances, and may expose
TASK_FAMILIES, {prefix: a function giving the Task named `prefix:<argument>` from its argument} (MRQA's
mrqa:<name>); the loop, the trials and the command line find tasks here by name."""
from typing import Dict, List, Sequence

from common.errors import InputError
from finetune import glue
from finetune.mrqa import task as mrqa
from finetune.squad import task as squad
from finetune.tagging import task as tagging
from finetune.tasks import Task

TASK_MODULES = (glue, squad, mrqa, tagging)


def _registry() -> Dict[str, Task]:
    tasks = {}
    for module in TASK_MODULES:
        for task in module.TASKS:
            if task.name in tasks:
                raise ValueError(f"task {task.name!r} is defined twice ({module.__name__})")
            tasks[task.name] = task
    return tasks


REGISTRY = _registry()
FAMILIES = {prefix: make for module in TASK_MODULES for prefix, make in getattr(module, "TASK_FAMILIES", {}).items()}


def task_names() -> List[str]:
    return list(REGISTRY)


def get_task(name: str) -> Task:
    key = name.strip().lower()
    prefix, colon, argument = key.partition(":")
    if colon and prefix in FAMILIES:
        return FAMILIES[prefix](argument)
    if key not in REGISTRY:
        families = "".join(f", {prefix}:<name>" for prefix in FAMILIES)
        raise InputError(f"--task {name!r}: unknown task; choose from {', '.join(REGISTRY)}{families} "
                         "(several separated by commas)")
    return REGISTRY[key]


def parse_task_list(text: str, own_tasks: Sequence[Task] = ()) -> List[Task]:
    """The tasks `--task` names, in its order; `own_tasks`: tasks of the user's files (finetune.custom),
    found by their names before the built-in ones (whose names they cannot take)."""
    names = [part for part in (text or "").split(",") if part.strip()]
    if not names:
        raise InputError("--task: no task given; pass one of " + ", ".join(task_names()))
    own = {task.name.lower(): task for task in own_tasks}
    tasks = [own.get(name.strip().lower()) or get_task(name) for name in names]
    if len({t.name for t in tasks}) != len(tasks):
        raise InputError(f"--task {text!r}: a task is named twice; name each once")
    return tasks
