"""What one JAX pretraining run trains and when: its config file, its examples as arrays, and the steps at which it
logs, evaluates and checkpoints. run_pretraining.py under JAX (training_jax.from_dataset) makes it from the config
it resolved, as the TensorFlow run does; studies that train on a device make theirs from their own plans. The run
(training_jax.pretrain.Run) reads nothing else of where it came from."""
import dataclasses
import pathlib


@dataclasses.dataclass(frozen=True)
class RunPlan:
    model: str  # the run's name, in its log lines and run record
    work: pathlib.Path  # the run's own folder: --max-minutes' sizing files (training_jax.fit) and its sized config
    config_file: pathlib.Path  # a PretrainingConfig's JSON: what trains (as sized, once a sized run resumes)
    train_arrays: pathlib.Path  # training_jax.arrays' packed .npz of the training examples
    eval_arrays: pathlib.Path  # ... of the held-out examples (none: no evaluation)
    log_every: int
    eval_every: int
    checkpoint_steps: tuple
    vocab_file: pathlib.Path = None  # copied into the model folder with each checkpoint
    fit: dict = None  # how --max-minutes sizes the run (training_jax.fit); None: it cannot be sized
    sized: bool = False  # the run sized itself already: its config file and steps are the sized ones

    def replace(self, **fields):
        return dataclasses.replace(self, **fields)
