"""GLUE readers (the shared GLUE files and fixtures in GLUE's formats for MNLI, its diagnostic set, QQP
and QNLI), AX.tsv, metrics against scikit-learn and SciPy, pair truncation, length bucketing and the
fine-tuning config recipe."""
import numpy as np
import pytest
import scipy.stats
import sklearn.metrics

from configs.finetuning_config import FinetuningConfig, size_of
from common.errors import InputError
from finetune import batches, metrics
from finetune.features import pack, truncate_pair
from finetune.glue import read_tsv_rows
from finetune.registry import get_task, parse_task_list
from tests.finetune_fixtures import DIAGNOSTIC_HEADER, MNLI_HEADER, _CharTokenizer, write, write_diagnostic, write_mnli

# (task, split): (rows, label set) of the shared GLUE files (see the shared data README).
SHARED_COUNTS = {
    ("cola", "train"): (8551, {"0", "1"}), ("cola", "dev"): (1043, {"0", "1"}), ("cola", "test"): (1063, {None}),
    ("sst", "train"): (67349, {"0", "1"}), ("sst", "dev"): (872, {"0", "1"}), ("sst", "test"): (1821, {None}),
    ("mrpc", "train"): (3668, {"0", "1"}), ("mrpc", "dev"): (408, {"0", "1"}), ("mrpc", "test"): (1725, {None}),
    ("sts", "train"): (5749, None), ("sts", "dev"): (1500, None), ("sts", "test"): (1379, {None}),
    ("rte", "train"): (2490, {"entailment", "not_entailment"}), ("rte", "dev"): (277, {"entailment", "not_entailment"}),
    ("rte", "test"): (3000, {None}),
    ("wnli", "train"): (635, {"0", "1"}), ("wnli", "dev"): (71, {"0", "1"}), ("wnli", "test"): (146, {None}),
}


@pytest.fixture(scope="module")
def glue_root(shared_data):
    root = shared_data / "glue"
    if not root.is_dir():
        pytest.fail(f"ELECTRA_SHARED_DATA is set but {root} is missing")
    return root


@pytest.mark.parametrize("task_name, split", sorted(SHARED_COUNTS))
def test_shared_glue_counts_and_labels(glue_root, task_name, split):
    rows, labels = SHARED_COUNTS[(task_name, split)]
    examples = get_task(task_name).read(glue_root, split)
    assert len(examples) == rows
    if labels is None:  # STS-B scores
        scores = np.array([e.label for e in examples])
        assert scores.min() >= 0.0 and scores.max() <= 5.0 and len(set(scores)) > 50
    else:
        assert {e.label for e in examples} == labels
    assert all(e.text_a for e in examples)
    assert all((e.text_b is not None) == get_task(task_name).is_pair for e in examples)


def test_header_handling_on_shared_files(glue_root):
    """CoLA train has no header (its first row is an example), CoLA test has one; MRPC's byte-order
    mark does not hide its header; test ids come from the index column."""
    cola_train = get_task("cola").read(glue_root, "train")
    first = read_tsv_rows(glue_root / "CoLA" / "train.tsv")[0]
    assert cola_train[0].text_a == first[3] and cola_train[0].label == first[1]
    cola_test = get_task("cola").read(glue_root, "test")
    assert cola_test[0].text_a == "Bill whistled past the house." and cola_test[5].guid == "5"
    mrpc = get_task("mrpc").read(glue_root, "dev")
    assert mrpc[0].label == "1" and mrpc[0].text_b.startswith('"The foodservice')  # quote kept as text
    assert len({e.guid for e in get_task("rte").read(glue_root, "test")}) == 3000


def test_glue_names_and_original_names_are_both_found(glue_root, tmp_path):
    (tmp_path / "glue_data").mkdir()
    (tmp_path / "glue_data" / "RTE").symlink_to(glue_root / "RTE")
    assert len(get_task("rte").read(tmp_path, "dev")) == 277
    (tmp_path / "sst").mkdir()
    (tmp_path / "sst" / "dev.tsv").write_text("sentence\tlabel\ngood .\t1\nbad .\t0\n")
    assert [e.label for e in get_task("sst").read(tmp_path, "dev")] == ["1", "0"]


def test_fixture_formats_mnli_qqp_qnli(tmp_path):
    mnli = tmp_path / "MNLI"
    row = ["0", "31193", "31193n", "government", "( ( x ) )", "( y )", "(ROOT x)", "(ROOT y)",
           'He said "yes.', "He agreed.", "neutral", "neutral"]
    write(mnli / "train.tsv", [MNLI_HEADER, row, row[:-2] + ["entailment", "entailment"]])
    write(mnli / "dev_matched.tsv", [MNLI_HEADER[:11] + ["label2", "gold_label"],
                                     row[:11] + ["neutral", "contradiction"]])
    write(mnli / "test_mismatched.tsv", [MNLI_HEADER[:10], row[:10]])
    task = get_task("mnli")
    train = task.read(tmp_path, "train")
    assert [e.label for e in train] == ["neutral", "entailment"] and train[0].text_a == 'He said "yes.'
    assert task.read(tmp_path, "dev_matched")[0].label == "contradiction"  # gold_label, not label1
    assert task.read(tmp_path, "test_mismatched")[0].label is None
    assert task.eval_splits() == {"dev_matched": "", "dev_mismatched": "_mm"}

    write(tmp_path / "QQP" / "train.tsv", [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                                         ["7", "15", "16", "How?", "Why?", "0"], ["8", "1", "2", "A?", "B?", "1"]])
    write(tmp_path / "QQP" / "test.tsv", [["id", "question1", "question2"], ["42", "How?", "Why?"]])
    qqp = get_task("qqp")
    assert [e.label for e in qqp.read(tmp_path, "train")] == ["0", "1"]
    assert qqp.read(tmp_path, "test")[0].guid == "42"

    write(tmp_path / "qnli" / "dev.tsv", [["index", "question", "sentence", "label"],
                                         ["0", "Who?", "Him.", "not_entailment"]])
    example = get_task("qnli").read(tmp_path, "dev")[0]
    assert (example.text_a, example.text_b, example.label) == ("Who?", "Him.", "not_entailment")


@pytest.mark.parametrize("layout", ["original", "glue", "lower_case_beside", "linked_glue_folder"])
def test_diagnostic_set_is_found_in_each_layout(tmp_path, layout):
    """In the MNLI folder (the original's finetuning_data/mnli/diagnostic.tsv), beside it (GLUE's
    glue_data/diagnostic/diagnostic.tsv, or finetuning_data/diagnostic/ next to mnli/), and beside the
    GLUE folder that a finetuning_data/mnli link points to."""
    root = tmp_path / "finetuning_data"
    if layout == "original":
        write_mnli(root / "mnli")
        expected = write_diagnostic(root / "mnli" / "diagnostic.tsv", 3)
    elif layout == "glue":
        write_mnli(root / "glue_data" / "MNLI")
        expected = write_diagnostic(root / "glue_data" / "diagnostic" / "diagnostic.tsv", 3)
    elif layout == "lower_case_beside":
        write_mnli(root / "mnli")
        expected = write_diagnostic(root / "diagnostic" / "diagnostic.tsv", 3)
    else:
        download = tmp_path / "download" / "glue_data"
        write_mnli(download / "MNLI")
        expected = write_diagnostic(download / "diagnostic" / "diagnostic.tsv", 3)
        root.mkdir()
        (root / "mnli").symlink_to(download / "MNLI")
    task = get_task("mnli")
    assert "diagnostic" in task.test_splits() and task.missing_test_splits(root) == {}
    assert task.split_file(root, "diagnostic").resolve() == expected.resolve()
    examples = task.read(root, "diagnostic")
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in examples] == [
        (str(i), f"The cat {i} sat .", f"A cat {i} sat .", None) for i in range(3)]


def test_ax_tsv_has_mnli_labels_one_row_per_diagnostic_example_in_order(tmp_path):
    write_mnli(tmp_path / "MNLI")
    write_diagnostic(tmp_path / "diagnostic" / "diagnostic.tsv", 40)
    task = get_task("mnli")
    examples = task.read(tmp_path, "diagnostic")
    outputs = np.random.default_rng(0).normal(size=(len(examples), 3))
    path = task.write_test_predictions(tmp_path / "out", "diagnostic", {"examples": examples}, outputs)
    assert path.name == "AX.tsv"
    lines = path.read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) == 41
    ids, labels = zip(*(line.split("\t") for line in lines[1:]))
    assert list(ids) == [str(i) for i in range(40)]
    assert list(labels) == [task.label_names[i] for i in outputs.argmax(-1)]
    assert set(labels) == {"entailment", "neutral", "contradiction"}
    assert task.write_test_predictions(tmp_path / "out", "test_mismatched", {"examples": examples},
                                       outputs).name == "MNLI-mm.tsv"


def _prepare_mnli(root, say):
    from finetune.trials import prepare_tasks

    config = FinetuningConfig.create({}, "small", ["mnli"])
    return prepare_tasks([get_task("mnli")], root, _CharTokenizer(), config, do_predict=True,
                         say=say)[0]


def test_absent_diagnostic_set_is_one_note_and_mnli_m_mm_are_still_written(tmp_path):
    write_mnli(tmp_path / "MNLI")
    notes = []
    data = _prepare_mnli(tmp_path, notes.append)
    about = [note for note in notes if "AX.tsv" in note]
    assert len(about) == 1 and "\n" not in about[0]
    assert str(tmp_path / "MNLI" / "diagnostic.tsv") in about[0]
    assert str(tmp_path / "diagnostic" / "diagnostic.tsv") in about[0]
    assert list(data.tests) == ["test_matched", "test_mismatched"]
    task, written = data.task, []
    for split, features in data.tests.items():
        written.append(task.write_test_predictions(tmp_path / "out", split, features, np.eye(3)[[0, 2]]).name)
    assert written == ["MNLI-m.tsv", "MNLI-mm.tsv"]

    write_diagnostic(tmp_path / "diagnostic" / "diagnostic.tsv", 4)
    notes.clear()
    data = _prepare_mnli(tmp_path, notes.append)
    assert not [note for note in notes if "AX.tsv" in note]
    assert list(data.tests) == ["test_matched", "test_mismatched", "diagnostic"]
    assert data.tests["diagnostic"]["count"] == 4


@pytest.mark.parametrize("case, fragment", [
    ("columns", "the header lacks the column(s) sentence1, sentence2"),
    ("empty", "the file is empty"),
    ("header_only", "the diagnostic split has no examples"),
    ("row", "line 3 has 2 tab-separated columns"),
])
def test_malformed_diagnostic_set_is_an_input_error_naming_it(tmp_path, case, fragment):
    write_mnli(tmp_path / "glue_data" / "MNLI")
    path = tmp_path / "glue_data" / "diagnostic" / "diagnostic.tsv"
    rows = {"columns": [["index", "premise", "hypothesis"], ["0", "a", "b"]],
            "header_only": [DIAGNOSTIC_HEADER],
            "row": [DIAGNOSTIC_HEADER, ["0", "a", "b"], ["1", "a"]]}
    if case == "empty":
        path.parent.mkdir(parents=True)
        path.write_text("")
    else:
        write(path, rows[case])
    with pytest.raises(InputError) as error:
        _prepare_mnli(tmp_path, lambda note: None)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and fragment in message and "\n" not in message
    assert "diagnostic" in message.rsplit(";", 1)[1]  # the fix names GLUE's diagnostic download, not MNLI


@pytest.mark.parametrize("case, fragment", [
    ("columns", "line 3 has 3 tab-separated columns"),
    ("label", "line 2: unknown label 'maybe'"),
    ("empty", "has no examples"),
    ("split", "no dev split"),
    ("folder", "no data folder"),
    ("header", "lacks the column(s) label"),
])
def test_bad_files_are_input_errors(tmp_path, case, fragment):
    header = ["index", "sentence1", "sentence2", "label"]
    rows = {"columns": [header, ["0", "a", "b", "entailment"], ["1", "a", "b"]],
            "label": [header, ["0", "a", "b", "maybe"]],
            "empty": [header],
            "header": [["index", "sentence1", "sentence2", "gold"], ["0", "a", "b", "entailment"]]}
    if case in rows:
        write(tmp_path / "rte" / "train.tsv", rows[case])
    elif case == "split":
        write(tmp_path / "rte" / "train.tsv", rows["label"])
    with pytest.raises(InputError) as error:
        get_task("rte").read(tmp_path, "dev" if case == "split" else "train")
    message = str(error.value)
    assert fragment in message and "\n" not in message


def test_task_list_parsing():
    assert [t.name for t in parse_task_list("rte, sts")] == ["rte", "sts"]
    for bad in ("", "rte,rte", "glue"):
        with pytest.raises(InputError):
            parse_task_list(bad)


def test_metrics_match_scikit_learn_and_scipy():
    rng = np.random.default_rng(0)
    labels, predictions = rng.integers(0, 2, 500), rng.integers(0, 2, 500)
    predictions[:300] = labels[:300]
    assert metrics.accuracy(labels, predictions) == pytest.approx(100 * sklearn.metrics.accuracy_score(labels, predictions))
    assert metrics.f1_binary(labels, predictions) == pytest.approx(100 * sklearn.metrics.f1_score(labels, predictions))
    assert metrics.matthews_corrcoef(labels, predictions) == pytest.approx(
        100 * sklearn.metrics.matthews_corrcoef(labels, predictions))
    assert metrics.matthews_corrcoef(labels, np.ones_like(labels)) == 0.0  # a constant prediction
    scores = np.round(rng.uniform(0, 5, 400), 1)  # many ties, as STS-B's scores have
    outputs = scores + rng.normal(0, 1.5, 400)
    outputs[:50] = np.round(outputs[:50])
    assert metrics.pearson(scores, outputs) == pytest.approx(100 * scipy.stats.pearsonr(scores, outputs)[0])
    assert metrics.spearman(scores, outputs) == pytest.approx(100 * scipy.stats.spearmanr(scores, outputs)[0])
    summary = metrics.summary([1.0, 2.0, 10.0])
    assert summary["median"] == 2.0 and summary["mean"] == pytest.approx(13 / 3)
    assert summary["std"] == pytest.approx(np.std([1.0, 2.0, 10.0]))


def test_pair_truncation_trims_the_longer_side_first():
    a, b = list(range(10)), list(range(100, 104))
    ta, tb = truncate_pair(a, b, 10)
    assert (len(ta), len(tb)) == (6, 4) and ta == a[:6]
    ta, tb = truncate_pair(list(range(5)), list(range(100, 105)), 8)
    assert (len(ta), len(tb)) == (4, 4)
    ids, segments = pack(np.arange(5, 50), np.arange(50, 60), 101, 102, 16)
    assert len(ids) == 16 and list(ids[[0, -1]]) == [101, 102]
    assert list(segments).count(1) == len(ids) - list(ids).index(102) - 1


@pytest.mark.parametrize("bucketing", [True, False])
def test_bucketing_never_truncates_or_drops(bucketing):
    rng = np.random.default_rng(1)
    ids = [rng.integers(5, 99, rng.integers(3, 64)).astype(np.int32) for _ in range(1003)]
    seen = []
    for batch in batches.iterate_batches({"input_ids": ids}, {"labels": np.arange(1003)}, 32, 64,
                                         rng=np.random.default_rng(2), bucketing=bucketing, pool_batches=4):
        assert batch["input_ids"].shape[1] == (batch["input_mask"].sum(1).max() if bucketing else 64)
        for row, index in enumerate(batch["index"]):
            length = len(ids[index])
            assert batch["labels"][row] == index
            assert np.array_equal(batch["input_ids"][row, :length], ids[index])
            assert batch["input_mask"][row].sum() == length
        seen.extend(batch["index"].tolist())
    assert sorted(seen) == list(range(1003))


def test_fixed_batches_are_the_default_and_bucketing_changes_who_shares_an_update():
    """The default is the original's: random batches padded to max_seq_length. length_bucketing (the fast
    option) pads to each batch's longest and, by sorting pools of 50 batches, puts examples of similar
    length together: other sets of examples share an update. With bucket_pool_batches 1 its batches are
    the fixed ones' sets, only padded shorter."""
    from finetune.loop import task_batches

    rng = np.random.default_rng(5)
    ids = [np.ones(rng.integers(3, 128), np.int32) for _ in range(1600)]
    features = {"sequences": {"input_ids": ids}, "scalars": {"labels": np.zeros(1600, np.int32)}, "count": 1600}
    task = get_task("rte")

    def epoch(**hparams):
        config = FinetuningConfig.create(hparams, "small", ["rte"])
        found = list(task_batches(task, features, config, np.random.default_rng(0), training=True))
        return config, {frozenset(b["index"].tolist()) for b in found}, found

    config, fixed, fixed_batches = epoch()
    assert not config.length_bucketing and config.max_seq_length == 128
    assert {b["input_ids"].shape[1] for b in fixed_batches} == {128}
    assert fixed == {frozenset(c.tolist()) for c in np.split(np.random.default_rng(0).permutation(1600), 50)}
    _, bucketed, bucketed_batches = epoch(length_bucketing=True)
    assert not fixed & bucketed  # no batch of the fixed epoch is a batch of the bucketed one

    def spread(batches):
        return np.mean([np.std(b["input_mask"].sum(1)) for b in batches])

    assert spread(bucketed_batches) < 0.1 * spread(fixed_batches)  # 0.8 tokens against 36
    _, pool_of_one, batches = epoch(length_bucketing=True, bucket_pool_batches=1)
    assert pool_of_one == fixed
    assert all(b["input_ids"].shape[1] == b["input_mask"].sum(1).max() for b in batches)


def test_bucketing_pads_less_than_fixed_length():
    rng = np.random.default_rng(3)
    ids = [np.ones(rng.integers(3, 128), np.int32) for _ in range(2000)]
    padded = sum(b["input_ids"].size for b in batches.iterate_batches(
        {"input_ids": ids}, {}, 32, 128, rng=np.random.default_rng(0)))
    assert padded < 0.7 * 2000 * 128


def test_pad_to_multiple_rounds_lengths_up_to_a_multiple_within_max_seq_length():
    """A few shapes for a compiler that specialises on them (JAX); same examples, same order, same masks."""
    rng = np.random.default_rng(4)
    ids = [np.ones(rng.integers(3, 101), np.int32) for _ in range(500)]
    plain, padded = ([b for b in batches.iterate_batches({"input_ids": ids}, {}, 32, 100,
                                                         rng=np.random.default_rng(0), pad_to_multiple=multiple)]
                     for multiple in (0, 32))
    assert {b["input_ids"].shape[1] for b in padded} <= {32, 64, 96, 100}  # capped at max_seq_length
    for a, b in zip(plain, padded):
        length = a["input_ids"].shape[1]
        assert b["input_ids"].shape[1] == min(-(-length // 32) * 32, 100)
        assert np.array_equal(a["index"], b["index"]) and np.array_equal(b["input_mask"][:, :length], a["input_mask"])
        assert not b["input_mask"][:, length:].any()
    with pytest.raises(InputError, match="pad_to_multiple -1"):
        FinetuningConfig.create({"pad_to_multiple": -1}, "small", ["rte"])


def test_recipe_defaults_and_overrides():
    small = FinetuningConfig.create({}, "small", ["rte"])
    assert (small.learning_rate, small.layerwise_lr_decay, small.num_train_epochs) == (3e-4, 0.8, 10.0)
    assert (small.weight_decay_rate, small.adam_epsilon, small.warmup_proportion) == (0.0, 1e-6, 0.1)
    assert (small.train_batch_size, small.max_seq_length) == (32, 128)
    large = FinetuningConfig.create('{"learning_rate": 1e-5}', "large", ["sst"])
    assert (large.learning_rate, large.layerwise_lr_decay, large.num_train_epochs) == (1e-5, 0.9, 3.0)
    base = FinetuningConfig.create({}, "base", ["squad"])
    assert (base.learning_rate, base.num_train_epochs, base.max_seq_length) == (1e-4, 2.0, 512)
    assert FinetuningConfig.create({}, "small", ["rte", "sts"]).num_train_epochs == 3.0
    with pytest.raises(InputError, match="unknown key"):
        FinetuningConfig.create('{"learning_rat": 1}', "small", ["rte"])
    with pytest.raises(InputError, match="layerwise_lr_variant"):
        FinetuningConfig.create('{"layerwise_lr_variant": "fixed"}', "small", ["rte"])
    assert size_of("electra_small_plus", 256) == "small" and size_of("my_model", 1024) == "large"


def test_double_unordered_swaps_mrpc_and_sts_training_pairs_only():
    from finetune.features import featurize
    from finetune.tasks import Example

    examples = [Example("0", "ab", "xyz", "1"), Example("1", "c", "d", "0")]
    train = featurize(get_task("mrpc"), examples, _CharTokenizer(), 16, training=True)
    assert len(train) == 4 and list(train.labels) == [1, 0, 1, 0] and list(train.example_index) == [0, 1, 0, 1]
    assert list(train.input_ids[0]) == [1, 97, 98, 2, 120, 121, 122, 2]
    assert list(train.input_ids[2]) == [1, 120, 121, 122, 2, 97, 98, 2]
    assert list(train.segment_ids[2]) == [0, 0, 0, 0, 0, 1, 1, 1]
    assert len(featurize(get_task("mrpc"), examples, _CharTokenizer(), 16, training=False)) == 2
    assert len(featurize(get_task("rte"), [Example("0", "a", "b", "entailment")], _CharTokenizer(), 16,
                         training=True)) == 1
    off = featurize(get_task("mrpc"), examples, _CharTokenizer(), 16, training=True, double_unordered=False)
    assert len(off) == 2


def test_prepare_without_training_reads_no_train_split(tmp_path):
    """Predicting from a fine-tuned model needs no train.tsv (and reports only what it featurized)."""
    from finetune.trials import prepare_tasks

    write_mnli(tmp_path / "MNLI")
    (tmp_path / "MNLI" / "train.tsv").unlink()
    notes = []
    config = FinetuningConfig.create({}, "small", ["mnli"])
    data = prepare_tasks([get_task("mnli")], tmp_path, _CharTokenizer(), config, do_train=False,
                         say=notes.append)[0]
    assert data.train is None and data.baseline == {}
    featurized = [note for note in notes if "featurized" in note]
    assert len(featurized) == 1 and "train" not in featurized[0] and "dev_matched" in featurized[0]
