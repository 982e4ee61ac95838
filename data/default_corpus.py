"""The corpus used when none is given: Python's own documentation, which every Python install carries.

Real human-written English (about 2 MB): the language-reference topics behind `help()` (pydoc_data) and
the docstrings of the pure-Python standard library. Each topic or module is one document, each prose
paragraph one line; code examples, grammar rules and heading rules are left out. It lets the builder and
the demo run with nothing downloaded; point --corpus-dir at a real corpus for real pretraining.
"""
import ast
import pathlib
import re
import sysconfig
from typing import Iterator, List, Tuple

from common import atomic

NUM_FILES = 8
_SKIPPED_PACKAGES = {"test", "tests", "idlelib", "lib2to3", "turtledemo", "site-packages", "dist-packages",
                     "ensurepip", "pydoc_data"}
_HEADING_RULE = re.compile(r"^[*=\-~^\"#+]{3,}$")


def _prose_paragraphs(text: str) -> List[str]:
    """Blank-line separated blocks, joined to one line each; indented blocks (code, grammar) dropped."""
    paragraphs = []
    for block in re.split(r"\n\s*\n", text):
        lines = [line for line in block.split("\n") if line.strip()]
        if not lines or lines[0].startswith((" ", "\t")) or lines[0].lstrip().startswith(">>>"):
            continue
        words = [line.strip() for line in lines if not _HEADING_RULE.match(line.strip())]
        paragraph = " ".join(words)
        if len(paragraph.split()) >= 3:
            paragraphs.append(paragraph)
    return paragraphs


def _topic_documents() -> Iterator[Tuple[str, List[str]]]:
    from pydoc_data import topics

    for name in sorted(topics.topics):
        yield f"topic:{name}", _prose_paragraphs(topics.topics[name])


def _docstring_documents() -> Iterator[Tuple[str, List[str]]]:
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.rglob("*.py")):
        if _SKIPPED_PACKAGES.intersection(path.relative_to(stdlib).parts):
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        paragraphs = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                docstring = ast.get_docstring(node)
                if docstring:
                    paragraphs.extend(_prose_paragraphs(docstring))
        yield f"module:{path.relative_to(stdlib)}", paragraphs


def write_default_corpus(folder: pathlib.Path) -> List[pathlib.Path]:
    """Writes the corpus as NUM_FILES plain-format files (documents separated by blank lines)."""
    folder.mkdir(parents=True, exist_ok=True)
    documents = [paragraphs for _, paragraphs in list(_topic_documents()) + list(_docstring_documents())
                 if paragraphs]
    paths = []
    for index in range(NUM_FILES):
        path = folder / f"python_docs_{index:02d}.txt"
        text = "\n\n".join("\n".join(paragraphs) for paragraphs in documents[index::NUM_FILES]) + "\n"
        atomic.write_text(path, text)
        paths.append(path)
    return paths
