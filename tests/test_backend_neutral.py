"""model/ and pretrain/ never import TensorFlow, and a tiny pretrainer trains under the JAX backend."""
import ast
import pathlib
import textwrap

from tests.helpers import run_script_under_jax

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
NEUTRAL_PACKAGES = ("model", "pretrain")


def neutral_sources():
    return sorted(path for package in NEUTRAL_PACKAGES for path in (REPO_ROOT / package).rglob("*.py"))


def test_no_tensorflow_import_in_model_or_pretrain():
    offenders = []
    for path in neutral_sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name == "tensorflow" or name.startswith("tensorflow.") for name in names):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
        if "import tensorflow" in path.read_text(encoding="utf-8"):
            offenders.append(str(path.relative_to(REPO_ROOT)))
    assert not offenders, offenders
    assert len(neutral_sources()) >= 12


JAX_SCRIPT = textwrap.dedent('''
    import importlib, json, pathlib, sys
    import numpy as np
    import keras
    assert keras.backend.backend() == "jax"
    ours = [p for pkg in ("model", "pretrain") for p in sorted(pathlib.Path(pkg).glob("*.py"))]
    for path in ours:
        importlib.import_module(".".join(path.with_suffix("").parts))
    tensorflow_after_import = "tensorflow" in sys.modules

    import jax
    from tests.model_fixtures import tiny_batch, tiny_pretrainer
    results = {"tensorflow_after_import": tensorflow_after_import}
    ONE_LAYER = {"model_hparam_overrides": {"num_layers": 1}}  # compiles in half the time of electra_tiny's 2
    model = tiny_pretrainer(**ONE_LAYER)
    batch = {k: jax.numpy.asarray(v) for k, v in tiny_batch(batch_size=4).items()}
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]

    def loss_fn(trainable, non_trainable):
        outputs, non_trainable = model.stateless_call(trainable, non_trainable, batch, training=True)
        return outputs.total_loss, (outputs.stats, non_trainable)

    step = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))
    (loss, (stats, new_non_trainable)), grads = step(trainable, non_trainable)
    (loss_2, _), _ = step(trainable, new_non_trainable)
    paths = [v.path for v in model.trainable_variables]
    norms = {p: float(jax.numpy.abs(g).max()) for p, g in zip(paths, grads)}
    results.update(
        loss=float(loss), second_loss=float(loss_2),
        finite=bool(all(np.isfinite(np.asarray(g)).all() for g in grads)),
        generator_grad=max(v for p, v in norms.items() if p.startswith("generator/encoder")),
        discriminator_grad=max(v for p, v in norms.items() if p.startswith("electra/encoder")),
        shared_grad=norms["electra/embeddings/word_embeddings"],
        metrics=model.finalize_metrics({k: np.asarray(v) for k, v in stats.items()}))

    electric = tiny_pretrainer(electric_objective=True, **ONE_LAYER)  # two causal towers, the cloze head, log q
    e_trainable = [v.value for v in electric.trainable_variables]
    e_non_trainable = [v.value for v in electric.non_trainable_variables]

    def electric_loss(trainable, non_trainable):
        outputs, _ = electric.stateless_call(trainable, non_trainable, batch, training=True)
        return outputs.total_loss, outputs.stats

    (e_loss, e_stats), e_grads = jax.jit(jax.value_and_grad(electric_loss, has_aux=True))(e_trainable,
                                                                                         e_non_trainable)
    e_norms = {v.path: float(jax.numpy.abs(g).max()) for v, g in zip(electric.trainable_variables, e_grads)}
    results["electric"] = {
        "loss": float(e_loss), "finite": bool(all(np.isfinite(np.asarray(g)).all() for g in e_grads)),
        "tower_grads": [max(v for p, v in e_norms.items() if p.startswith(t)) for t in ("generator_ltr/",
                                                                                           "generator_rtl/",
                                                                                           "cloze_predictions/")],
        "metrics": electric.finalize_metrics({k: np.asarray(v) for k, v in e_stats.items()})}

    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    history = model.fit(tiny_batch(batch_size=8), batch_size=4, epochs=1, verbose=0).history
    results["fit_loss"] = history["loss"][-1]
    results["fit_keys"] = sorted(history)
    print("RESULTS" + json.dumps(results))
''')


def test_tiny_pretrainer_forward_backward_and_fit_under_jax():
    results = run_script_under_jax(JAX_SCRIPT, REPO_ROOT)
    assert results["tensorflow_after_import"] is False
    assert results["finite"] and 0 < results["loss"] < 1e3
    assert results["loss"] != results["second_loss"]  # the seed state advanced: new masks, new samples
    assert results["generator_grad"] > 0 and results["discriminator_grad"] > 0 and results["shared_grad"] > 0
    assert 0.0 <= results["metrics"]["disc_auc"] <= 1.0
    assert results["fit_loss"] > 0 and "disc_auc" in results["fit_keys"]
    electric = results["electric"]  # Electric runs under JAX too
    assert electric["finite"] and 0 < electric["loss"] < 1e3 and min(electric["tower_grads"]) > 0
    assert electric["metrics"]["cloze_loss"] > 0 and 0.0 <= electric["metrics"]["disc_auc"] <= 1.0
