"""Real-data tier: the four shared Wikipedia shards with BERT's vocabulary, built and read back."""
import json

import build_pretraining_dataset as cli
from data import tfrecords
from data.inspect_dataset import count_examples


def test_wikipedia_build_counts_equal_what_the_reader_reads(tmp_path, wiki_shards, bert_vocab_file):
    output = tmp_path / "pretrain_tfrecords"
    cli.main(["--corpus-dir", *map(str, wiki_shards), "--corpus-format", "wikiextractor",
              "--vocab-file", str(bert_vocab_file), "--data-dir", str(tmp_path), "--num-processes", "2"])
    metadata = json.loads((output / "metadata.json").read_text())
    counts = metadata["counts"]
    assert counts["files"] == 4 and counts["documents"] > 10_000
    assert counts["text_bytes"] > 150e6 and counts["bad_utf8_lines"] == 0
    assert metadata["vocab"]["size"] == 30522
    assert metadata["vocab"]["special_ids"] == {"pad": 0, "unk": 100, "cls": 101, "sep": 102, "mask": 103}
    assert len(metadata["shards"]) >= 8 and len(metadata["shards"]) % 2 == 0
    examples, tokens, first = count_examples(output, tfrecords.load_metadata(output), batch_size=2048)
    assert (examples, tokens) == (counts["examples"], counts["tokens"])
    # About 6-7 tokens per 40 bytes of English text: the examples really hold the corpus.
    assert 0.1 < counts["tokens"] / counts["text_bytes"] < 0.3
    assert first["input_ids"][0] == 101
