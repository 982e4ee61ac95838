"""The README's Python example runs as written, on a model folder at the path it names."""
import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def python_example():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) == 1, "the README holds one Python example"
    return blocks[0]


def test_the_readme_python_example_runs_as_written(tmp_path, monkeypatch):
    from configs.pretraining_config import PretrainingConfig
    from pretrain.builder import build_pretrainer
    from storage.model_folder import write_model_folder
    from tests.helpers import MICRO_MODEL, SPECIALS, write_corpus, write_vocab

    vocab = write_vocab(write_corpus(tmp_path / "corpus"), tmp_path / "vocab.txt")
    size = len(vocab.read_text().splitlines())
    ids = {token: SPECIALS.index(token) for token in ("[CLS]", "[SEP]", "[MASK]")}
    config = PretrainingConfig.create({
        "model_name": "electra_tiny", "model_size": "electra_small", "model_hparam_overrides": MICRO_MODEL,
        "vocab_size": size, "cls_token_id": ids["[CLS]"], "sep_token_id": ids["[SEP]"],
        "mask_token_id": ids["[MASK]"], "max_seq_length": 32, "max_predictions_per_seq": 5})
    monkeypatch.chdir(tmp_path)
    write_model_folder(pathlib.Path("electra_demo/models/electra_tiny"), config, build_pretrainer(config), vocab)

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(python_example(), "README.md", "exec"), {})
    lines = printed.getvalue().splitlines()
    guesses = [line.split() for line in lines[:3]]
    assert len(guesses) == 3 and all(len(g) == 2 and 0 < float(g[1]) <= 1 for g in guesses)
    assert sum(float(g[1]) for g in guesses) <= 1.0 + 1e-6  # the top three of one distribution
    per_token = eval(lines[3])  # noqa: S307  the example prints a list of (token, P(replaced))
    assert per_token[0][0] == "[CLS]" and per_token[-1][0] == "[SEP]"
    assert all(0 <= p <= 1 for _, p in per_token)
