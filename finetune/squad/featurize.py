"""SQuAD examples → windows of [CLS] question [SEP] context [SEP], as the original (BERT's
convert_examples_to_features): the question cut to max_query_length word pieces, the context in windows
of max_seq_length − |question| − 3 pieces every doc_stride, each piece remembering its whitespace word
and whether this window gives it the most context. Training positions point at the answer's pieces
(narrowed by _improve_answer_span) or at [CLS] (0) when the window lacks the answer or there is none. Training skips questions whose
answer text is not in the words its offsets point at (the original logged and skipped them).

Speed: every distinct whitespace word, question and answer is tokenized once, in batched calls.
"""
import dataclasses
from typing import Dict, List

import numpy as np


@dataclasses.dataclass
class Window:
    example_index: int
    doc_span_index: int
    input_ids: np.ndarray
    segment_ids: np.ndarray
    token_to_orig: Dict[int, int]  # position in input_ids → whitespace word of the context
    token_is_max_context: Dict[int, bool]
    start_position: int
    end_position: int


def _improve_answer_span(doc_pieces, start, end, answer_pieces):
    """The smallest piece span equal to the answer's own tokenization ("(1895)" → "1895")."""
    answer = tuple(answer_pieces)
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if tuple(doc_pieces[new_start:new_end + 1]) == answer:
                return new_start, new_end
    return start, end


def _is_max_context(doc_spans, span_index, position):
    best_score, best_index = None, None
    for index, (span_start, length) in enumerate(doc_spans):
        end = span_start + length - 1
        if position < span_start or position > end:
            continue
        score = min(position - span_start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return span_index == best_index


def tokenize_examples(examples, tokenizer):
    """(pieces per whitespace word, pieces per question, pieces per first answer), batched."""
    words = sorted({word for example in examples for word in example.paragraph.doc_tokens})
    encoded = tokenizer.encode_batch(words) if words else []
    word_pieces = {word: ids.tolist() for word, ids in zip(words, encoded)}
    questions = [ids.tolist() for ids in tokenizer.encode_batch([e.question for e in examples])]
    answers = [ids.tolist() for ids in tokenizer.encode_batch([e.answer_text for e in examples])]
    return word_pieces, questions, answers


def featurize_examples(examples, tokenizer, max_seq_length, doc_stride, max_query_length, training) -> List[Window]:
    word_pieces, questions, answers = tokenize_examples(examples, tokenizer)
    cls, sep = tokenizer.special_ids.cls, tokenizer.special_ids.sep
    windows = []
    cache = {}
    for example_index, example in enumerate(examples):
        if training and not example.answer_found:
            continue  # as the original: an answer its words do not contain is not trained on
        paragraph = example.paragraph
        key = id(paragraph)
        if key not in cache:  # questions share their paragraph's pieces
            tok_to_orig, orig_to_tok, pieces = [], [], []
            for word_index, word in enumerate(paragraph.doc_tokens):
                orig_to_tok.append(len(pieces))
                for piece in word_pieces[word]:
                    tok_to_orig.append(word_index)
                    pieces.append(piece)
            cache = {key: (tok_to_orig, orig_to_tok, pieces)}
        tok_to_orig, orig_to_tok, pieces = cache[key]
        query = questions[example_index][:max_query_length]
        tok_start = tok_end = -1
        if training and not example.is_impossible and example.start_word >= 0:
            tok_start = orig_to_tok[example.start_word]
            if example.end_word < len(paragraph.doc_tokens) - 1:
                tok_end = orig_to_tok[example.end_word + 1] - 1
            else:
                tok_end = len(pieces) - 1
            tok_start, tok_end = _improve_answer_span(pieces, tok_start, tok_end, answers[example_index])
        max_doc = max_seq_length - len(query) - 3
        doc_spans, offset = [], 0
        while offset < len(pieces):
            length = min(len(pieces) - offset, max_doc)
            doc_spans.append((offset, length))
            if offset + length == len(pieces):
                break
            offset += min(length, doc_stride)
        for span_index, (span_start, length) in enumerate(doc_spans):
            head = [cls] + query + [sep]
            ids = np.array(head + pieces[span_start:span_start + length] + [sep], np.int32)
            segments = np.concatenate([np.zeros(len(head), np.int32), np.ones(length + 1, np.int32)])
            token_to_orig, max_context = {}, {}
            for i in range(length):
                position = len(head) + i
                token_to_orig[position] = tok_to_orig[span_start + i]
                max_context[position] = _is_max_context(doc_spans, span_index, span_start + i)
            start = end = 0
            if tok_start >= 0 and span_start <= tok_start and tok_end <= span_start + length - 1:
                start, end = tok_start - span_start + len(head), tok_end - span_start + len(head)
            windows.append(Window(example_index, span_index, ids, segments, token_to_orig, max_context, start, end))
    return windows
