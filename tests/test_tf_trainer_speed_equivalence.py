"""TFTrainer's compiled optimizer update (compiled_update, the default) trains the same numbers as the
update run inline in the step, and compiles once whatever the batch shapes."""
import numpy as np
import pytest

from tests.finetune_fixtures import TASKS, config_for, synthetic_features, tiny_model

pytest.importorskip("tensorflow")


def _train(compiled_update, multitask_batches, steps=5):
    """Losses of the first `steps` updates of a tiny model (head dropout on, clipping, warmup, layer-wise
    decay: the recipe's defaults), its weights and optimizer variables after them, and the trainer."""
    from finetune.loop import build_optimizer
    from finetune.tf_trainer import TFTrainer

    config = config_for(max_seq_length=64, learning_rate=1e-2, multitask_batches=multitask_batches,
                        length_bucketing=True)
    model = tiny_model(TASKS, config)
    trainer = TFTrainer(model, TASKS, build_optimizer(config, 10, 1), config, compiled_update=compiled_update)
    losses, shapes = [], set()
    for task, batch in trainer.epoch_batches(synthetic_features(1), np.random.default_rng(0)):
        losses.append(float(trainer.step(task, batch)))
        shapes.add((task.name, batch["input_ids"].shape))
        if len(losses) == steps:
            break
    state = {v.path: np.array(v.numpy()) for v in model.weights + trainer.optimizer.variables}
    return losses, state, trainer, shapes


def _assert_same_training(multitask_batches, steps):
    """Both ways from the same weights: the same losses and, after them, the same weights and moments
    (float32 rounding); returns the compiled trainer and the (task, batch shape) pairs it trained on."""
    losses, state, _, shapes = _train(False, multitask_batches, steps)
    compiled_losses, compiled_state, trainer, _ = _train(True, multitask_batches, steps)
    assert len(set(losses)) == len(losses)  # the weights moved between updates
    np.testing.assert_allclose(compiled_losses, losses, rtol=1e-5)
    assert compiled_state.keys() == state.keys()
    for path, value in state.items():
        np.testing.assert_allclose(compiled_state[path], value, rtol=1e-4, atol=1e-6, err_msg=path)
    assert any("adam_m" in path and np.any(value) for path, value in state.items())
    return trainer, shapes


def test_mixed_batches_train_the_same_numbers_with_the_compiled_update():
    _, shapes = _assert_same_training("mixed", steps=4)
    assert len(shapes) > 1  # batches of several lengths


def test_per_task_batches_train_the_same_numbers_and_compile_the_update_once_per_task():
    trainer, shapes = _assert_same_training("per_task", steps=6)
    by_task = {}
    for name, shape in shapes:
        by_task.setdefault(name, set()).add(shape)
    assert any(len(task_shapes) > 1 for task_shapes in by_task.values())
    assert trainer.update_tracing_counts() == {name: 1 for name in by_task}


def test_use_xla_compiles_the_whole_step_instead():
    from finetune.loop import build_optimizer
    from finetune.tf_trainer import TFTrainer

    config = config_for(max_seq_length=64, use_xla=True)
    trainer = TFTrainer(tiny_model(TASKS, config), TASKS, build_optimizer(config, 10, 1), config)
    assert not trainer.compiled_update
