"""Every tf.function in the product is traced without autograph (docs/benchmarks.md, "Tracing without autograph"):
its code branches only on Python values, so converting it (and the Keras and tensorflow-text code it calls) only
costs tracing time (about a tenth of the electra_small pretraining command's start). Read from the source with ast;
a tf.function that needs a tensor-dependent branch writes it as tf.cond or tf.while_loop."""
import ast

from tests.source_tree import module_files


def tf_function_calls(tree):
    """The `tf.function(...)` calls and `@tf.function` decorators of a module's syntax tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "tf.function":
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield from (d for d in node.decorator_list if ast.unparse(d) == "tf.function")


def autograph_off(node):
    return isinstance(node, ast.Call) and any(
        k.arg == "autograph" and isinstance(k.value, ast.Constant) and k.value.value is False for k in node.keywords)


def test_every_product_tf_function_is_traced_without_autograph():
    found, with_autograph = 0, []
    for path in module_files().values():
        for node in tf_function_calls(ast.parse(path.read_text(encoding="utf-8"))):
            found += 1
            if not autograph_off(node):
                with_autograph.append(f"{path.name}:{node.lineno}")
    assert found >= 10, found  # the reader still finds them
    assert with_autograph == [], f"pass autograph=False (and write tensor branches as tf.cond): {with_autograph}"


def test_the_reader_tells_a_call_with_autograph_from_one_without():
    tree = ast.parse("f = tf.function(g)\nh = tf.function(g, autograph=False)\n@tf.function\ndef k(): pass\n")
    nodes = sorted(tf_function_calls(tree), key=lambda node: node.lineno)
    assert [autograph_off(node) for node in nodes] == [False, True, False]
