"""storage/model_folder.py: the one reader and writer of pretrained model folders (no model is built here)."""
import pytest

from common.errors import InputError
from configs.pretraining_config import PretrainingConfig
from storage import model_folder


def fake_folder(path, steps=(2, 5), vocab=("vocab.txt",)):
    """A folder with a config, vocabulary files and empty checkpoint files listed in a state file."""
    path.mkdir(parents=True)
    model_folder.write_config(path, PretrainingConfig.create({"model_size": "electra_tiny"}))
    for name in vocab:
        (path / name).write_text("[PAD]\n")
    for step in steps:
        for suffix in (".index", ".data-00000-of-00001"):
            (path / f"ckpt-{step}{suffix}").write_bytes(b"")
    if steps:
        model_folder.write_state(path, f"ckpt-{steps[-1]}")
    return path


def test_folder_or_prefix_resolves_to_one_checkpoint(tmp_path):
    folder = fake_folder(tmp_path / "m")
    assert model_folder.resolve_checkpoint(folder) == str(folder / "ckpt-5")
    assert model_folder.resolve_checkpoint(folder / "ckpt-2") == str(folder / "ckpt-2")
    assert model_folder.checkpoint_step(model_folder.resolve_checkpoint(folder)) == 5
    with pytest.raises(InputError, match=r"^--init-checkpoint .*ckpt-7: no such checkpoint \(expected .*ckpt-7.index\)"):
        model_folder.resolve_checkpoint(folder / "ckpt-7")
    empty = fake_folder(tmp_path / "empty", steps=())
    with pytest.raises(InputError, match="model folder .*: the folder holds no checkpoint"):
        model_folder.resolve_checkpoint(empty, flag="model folder")


def test_one_vocabulary_rule_for_every_reader(tmp_path):
    """vocab.txt wins; else the one SentencePiece model; several models are refused (fine-tuning used to take
    the first in sorted order where export refused them)."""
    from finetune.pretrained import read_model_folder

    assert model_folder.find_vocab(fake_folder(tmp_path / "wp", vocab=("vocab.txt", "a.model"))).name == "vocab.txt"
    assert read_model_folder(fake_folder(tmp_path / "sp", vocab=("sp.model",))).sp_model.name == "sp.model"
    several = fake_folder(tmp_path / "two", vocab=("a.model", "b.model"))
    with pytest.raises(InputError, match=r"2 SentencePiece models \(a.model, b.model\) and no vocab.txt; keep only"):
        read_model_folder(several)
    with pytest.raises(InputError, match="no vocabulary"):
        read_model_folder(fake_folder(tmp_path / "none", vocab=()))


def test_a_linked_checkpoint_is_a_complete_folder_of_its_own(tmp_path):
    source = fake_folder(tmp_path / "run", steps=(2, 5))
    linked = model_folder.link_checkpoint(source, 2, tmp_path / "run_step2")
    assert model_folder.is_complete(linked) and model_folder.resolve_checkpoint(linked) == str(linked / "ckpt-2")
    assert sorted(p.name for p in linked.iterdir()) == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
                                                        "config.json", "vocab.txt"]
    assert (linked / "ckpt-2.index").stat().st_ino == (source / "ckpt-2.index").stat().st_ino  # hard links
    assert model_folder.read_config(linked) == model_folder.read_config(source)


def test_saved_checkpoints_are_every_index_on_disk_by_step(tmp_path):
    folder = fake_folder(tmp_path / "run", steps=(2, 5, 10))
    (folder / "ckpt-7.data-00000-of-00001").write_bytes(b"")  # no index: not a checkpoint
    model_folder.write_state(folder, "ckpt-5")  # listed or not, each is on disk
    assert model_folder.saved_checkpoints(folder) == [str(folder / f"ckpt-{step}") for step in (2, 5, 10)]
    assert model_folder.saved_checkpoints(tmp_path / "nothing") == []
