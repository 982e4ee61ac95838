"""Damaged bytes in a dataset shard or a checkpoint: one line naming the file and the way on, exit 2, and the
model folder's checkpoints left exactly as they were.

The damage keeps each file's size (64 bytes flipped in the middle), so the size check of load_metadata
passes and only the records' or tensors' checksums can find it; for checkpoints, truncation too.
"""
import json
import shutil

import pytest

import run_pretraining
from data import inspect_dataset, tfrecords
from tests.helpers import MICRO_MODEL, build_tiny_dataset
from storage import model_folder

# 1 layer: a damaged file is found and named whatever the model's depth
FAST = {"model_size": "electra_tiny", "model_hparam_overrides": {**MICRO_MODEL, "num_layers": 1}, "train_batch_size": 8,
        "eval_batch_size": 8, "num_warmup_steps": 10, "iterations_per_loop": 10, "save_checkpoints_steps": 10}
SHARD_0, SHARD_1 = (tfrecords.shard_name(i, 2) for i in range(2))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny dataset and a model folder trained on it for 20 steps: ckpt-10 and ckpt-20."""
    folder = tmp_path_factory.mktemp("damage")
    build_tiny_dataset(folder, max_seq_length=32, num_shards=2, max_documents=40)
    run_pretraining.main(cli(folder, num_train_steps=20))
    return folder


@pytest.fixture
def data_dir(trained, tmp_path):
    """A copy of the dataset and the model folder that a test may damage."""
    for part in ("pretrain_tfrecords", "models"):
        shutil.copytree(trained / part, tmp_path / part)
    return tmp_path


def cli(data_dir, **hparams):
    return ["--model-name", "electra_tiny", "--data-dir", str(data_dir), "--hparams", json.dumps({**FAST, **hparams})]


def flip_middle(path, count=64):
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + count] = bytes(b ^ 0xFF for b in data[middle:middle + count])
    path.write_bytes(bytes(data))


def truncate(path):
    path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def folder_bytes(model_dir):
    """Every checkpoint file and the state file, by name: what must survive an error unchanged."""
    return {p.name: p.read_bytes() for p in sorted(model_dir.iterdir())
            if p.name == "checkpoint" or p.name.startswith("ckpt-")}


def one_error_line(capsys, exit_info):
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_a_damaged_training_shard_names_itself_and_keeps_the_checkpoints(data_dir, capsys, monkeypatch):
    """Resumed at step 20 and saving every 10 steps, the run reaches the flipped record later: one line
    naming that shard and --overwrite, exit 2, and the checkpoints as they were when the error came."""
    model_dir = data_dir / "models" / "electra_tiny"
    before = folder_bytes(model_dir)
    flip_middle(data_dir / "pretrain_tfrecords" / SHARD_0)
    at_error = {}
    scan = tfrecords.first_damaged_shard

    def scan_after_snapshot(files):
        at_error.update(folder_bytes(model_dir))
        return scan(files)
    monkeypatch.setattr(tfrecords, "first_damaged_shard", scan_after_snapshot)

    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main(cli(data_dir, num_train_steps=200, keep_checkpoint_max=0))
    line = one_error_line(capsys, exit_info)
    assert f"{data_dir / 'pretrain_tfrecords' / SHARD_0}: damaged (corrupted record at" in line
    assert "build_pretraining_dataset.py command and --overwrite" in line and SHARD_1 not in line
    assert "ckpt-30.index" in at_error  # it saved once more before it met the damage (fixed by the seed)
    assert folder_bytes(model_dir) == at_error  # and wrote nothing after the error
    assert all(at_error[name] == data for name, data in before.items() if name != "checkpoint")  # nor before


def test_a_damaged_eval_shard_stops_the_evaluation_with_one_line(data_dir, capsys):
    """With do_eval the last shard is held out; resumed at its last step, the run evaluates at once and
    meets the damage there: one line naming that shard, the checkpoints untouched."""
    model_dir = data_dir / "models" / "electra_tiny"
    before = folder_bytes(model_dir)
    flip_middle(data_dir / "pretrain_tfrecords" / SHARD_1)
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main(cli(data_dir, num_train_steps=20, do_eval=True))
    line = one_error_line(capsys, exit_info)
    assert line.startswith(f"error: {data_dir / 'pretrain_tfrecords' / SHARD_1}: damaged (")
    assert "--overwrite" in line
    assert folder_bytes(model_dir) == before


def test_inspect_dataset_names_the_damaged_shard(data_dir, capsys):
    flip_middle(data_dir / "pretrain_tfrecords" / SHARD_1)
    with pytest.raises(SystemExit) as exit_info:
        inspect_dataset.main([str(data_dir / "pretrain_tfrecords")])
    line = one_error_line(capsys, exit_info)
    assert f"{SHARD_1}: damaged (corrupted record at" in line and "--overwrite" in line


@pytest.mark.parametrize("damage", ["truncated_data", "flipped_data", "flipped_index", "both_damaged"])
def test_a_damaged_latest_checkpoint_names_the_file_and_the_older_one(data_dir, capsys, damage):
    """Resuming on a damaged ckpt-20: one line naming its file and ckpt-10 (or that none is complete),
    nothing in the folder changed; following the advice (moving ckpt-20.* away) resumes from ckpt-10."""
    model_dir = data_dir / "models" / "electra_tiny"
    data_file = model_dir / "ckpt-20.data-00000-of-00001"
    if damage == "flipped_index":
        flip_middle(model_dir / "ckpt-20.index")
    elif damage == "flipped_data":
        flip_middle(data_file)
    else:
        truncate(data_file)
    if damage == "both_damaged":
        flip_middle(model_dir / "ckpt-10.data-00000-of-00001")
    before = folder_bytes(model_dir)
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main(cli(data_dir, num_train_steps=30))
    line = one_error_line(capsys, exit_info)
    damaged = model_dir / "ckpt-20.index" if damage == "flipped_index" else data_file
    assert line.startswith(f"error: {damaged}: damaged (") and "cannot resume from ckpt-20" in line
    assert folder_bytes(model_dir) == before
    moved = data_dir / "moved"
    moved.mkdir()
    if damage == "both_damaged":
        assert f"no older complete checkpoint is listed: move ckpt-20.*, ckpt-10.* out of {model_dir}" in line
        for path in model_dir.glob("ckpt-*"):
            path.rename(moved / path.name)
        run = run_pretraining.prepare(run_pretraining.parse_args(cli(data_dir, num_train_steps=30)))
        assert model_folder.latest_checkpoint(model_dir) is None and run.saved_config is None  # a new run
        return
    assert f"ckpt-10 is complete: move ckpt-20.* out of {model_dir}" in line

    for path in model_dir.glob("ckpt-20.*"):
        path.rename(moved / path.name)
    assert run_pretraining.main(cli(data_dir, num_train_steps=10)) == 10
    out = capsys.readouterr().out
    assert f"Resuming from {model_dir / 'ckpt-10'} at step 10." in out
    assert "ckpt-20 is listed in" in out


def test_a_damaged_checkpoint_state_file_says_what_to_write_into_it(data_dir, capsys):
    """TensorFlow reads an unparsable `checkpoint` file as "no checkpoint", so the run would start over and
    write over ckpt-10; instead one line names it and the line to write, which resumes from ckpt-20."""
    model_dir = data_dir / "models" / "electra_tiny"
    flip_middle(model_dir / "checkpoint")
    before = folder_bytes(model_dir)
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main(cli(data_dir, num_train_steps=30))
    line = one_error_line(capsys, exit_info)
    assert line == (f'error: {model_dir / "checkpoint"}: damaged (not a checkpoint state), so the latest checkpoint '
                    f'is unknown; ckpt-20 is the newest complete one: write the line model_checkpoint_path: '
                    f'"ckpt-20" into {model_dir / "checkpoint"} (and nothing else) and run the same command again '
                    'to resume from it')
    assert folder_bytes(model_dir) == before

    (model_dir / "checkpoint").write_text('model_checkpoint_path: "ckpt-20"\n')
    assert run_pretraining.main(cli(data_dir, num_train_steps=20)) == 20
    assert f"Resuming from {model_dir / 'ckpt-20'} at step 20." in capsys.readouterr().out


@pytest.mark.parametrize("damage", ["truncated_data", "both_damaged"])
def test_a_damaged_init_checkpoint_names_the_file_and_the_newest_complete_one(data_dir, capsys, damage):
    """--init-checkpoint on a folder whose ckpt-20 data file was cut short ended in an IndexError traceback:
    now one line naming that file and ckpt-10 (or that no checkpoint there is complete), exit 2; passing
    ckpt-10 as the advice says starts the run from it."""
    source = data_dir / "models" / "electra_tiny"
    data_file = source / "ckpt-20.data-00000-of-00001"
    truncate(data_file)
    if damage == "both_damaged":
        flip_middle(source / "ckpt-10.data-00000-of-00001")
    before = folder_bytes(source)
    argv = ["--model-name", "continued", "--data-dir", str(data_dir), "--hparams",
            json.dumps({**FAST, "num_train_steps": 10})]
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main(argv + ["--init-checkpoint", str(source)])
    line = one_error_line(capsys, exit_info)
    assert line.startswith(f"error: {data_file}: damaged (") and "Traceback" not in line
    assert f"so --init-checkpoint {source / 'ckpt-20'} cannot be read; " in line
    assert folder_bytes(source) == before
    if damage == "both_damaged":
        assert line.endswith(f"no complete checkpoint is in {source}: copy ckpt-20.* there again from where they came")
        return
    assert line.endswith(f"ckpt-10 is the newest complete checkpoint in {source}: pass --init-checkpoint "
                         f"{source / 'ckpt-10'}")
    assert run_pretraining.main(argv + ["--init-checkpoint", str(source / "ckpt-10")]) == 10
    assert f"Starting from the weights of {source / 'ckpt-10'}" in capsys.readouterr().out


def test_fine_tuning_a_damaged_model_folder_names_the_file_and_the_checkpoint_to_use(data_dir):
    """The same restore reads a pretrained folder for fine-tuning: one InputError line, with the state file
    line that makes the folder's complete ckpt-10 the one it reads."""
    from common.errors import InputError
    from finetune.pretrained import load_encoder, read_model_folder

    source = data_dir / "models" / "electra_tiny"
    truncate(source / "ckpt-20.data-00000-of-00001")
    with pytest.raises(InputError) as error:
        load_encoder(read_model_folder(source))
    message = str(error.value)
    assert len(message.splitlines()) == 1 and message.startswith(f"{source / 'ckpt-20.data-00000-of-00001'}: damaged (")
    assert message.endswith(f'ckpt-10 is the newest complete checkpoint in {source}: write the line '
                            f'model_checkpoint_path: "ckpt-10" into {source}/checkpoint (the checkpoint it reads) '
                            'and run the same command again')
    (source / "checkpoint").write_text('model_checkpoint_path: "ckpt-10"\n')
    assert load_encoder(read_model_folder(source)).built


@pytest.mark.parametrize("damaged", [True, False])
def test_a_worker_whose_peer_stopped_on_a_damaged_shard_names_it_too(data_dir, capsys, monkeypatch, damaged):
    """With several workers only the one reading the damaged shard meets the DataLossError (and stops with
    the line above); the others see their collective aborted: measured with two MultiWorkerMirroredStrategy
    workers on localhost, an UnavailableError ("Collective ops is aborted by: ... The tasks have crashed"),
    a traceback and exit 1. That error is raised here in the training step, as a peer's exit raises it:
    with a damaged shard the worker prints the same one line, exit 2; without one it is re-raised (a peer
    that stopped for another reason)."""
    import tensorflow as tf

    from training.step import PretrainingSteps

    def aborted(self, *args, **kwargs):
        raise tf.errors.UnavailableError(None, None, "Collective ops is aborted by: Error reported from "
                                                     "/job:worker/task:1: The tasks have crashed.")
    monkeypatch.setattr(PretrainingSteps, "train", aborted)
    if not damaged:
        with pytest.raises(tf.errors.UnavailableError):
            run_pretraining.main(cli(data_dir, num_train_steps=30))
        return
    flip_middle(data_dir / "pretrain_tfrecords" / SHARD_1)
    with pytest.raises(SystemExit) as exit_info:
        run_pretraining.main(cli(data_dir, num_train_steps=30))
    line = one_error_line(capsys, exit_info)
    assert line.startswith(f"error: {data_dir / 'pretrain_tfrecords' / SHARD_1}: damaged (corrupted record at ")
    assert "build_pretraining_dataset.py command and --overwrite" in line
