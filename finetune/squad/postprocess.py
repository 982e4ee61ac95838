"""Beam outputs → answer texts, as the original's qa_metrics.py: per question, candidate spans from every
window (start in the top beam, end in that start's top beam; both in the context, in a window where the
start has its maximum context, end ≥ start, at most max_answer_length pieces), ranked by start + end
log-probability; the text is projected back onto the original context by get_final_text. SQuAD 2.0's
null odds are the minimum over windows of the answerability logit.
"""
import unicodedata

from data.tokenization import is_split_character, normalize_case_and_accents
from finetune.squad.reader import is_whitespace


def _basic_tokenize(text, lower_case):
    """BERT's BasicTokenizer in Python (what get_final_text re-tokenizes the original words with)."""
    kept = []
    for char in text:
        code = ord(char)
        if code == 0 or code == 0xFFFD:
            continue
        category = unicodedata.category(char)
        if char in " \t\n\r" or category == "Zs":
            kept.append(" ")
        elif category.startswith("C"):
            continue
        else:
            kept.append(char)
    tokens = []
    for word in "".join(kept).split():
        if lower_case:
            word = normalize_case_and_accents(word, True, True)
        current = ""
        for char in word:
            if is_split_character(char):
                if current:
                    tokens.append(current)
                tokens.append(char)
                current = ""
            else:
                current += char
        if current:
            tokens.append(current)
    return tokens


def _strip_spaces(text):
    chars, mapping = [], {}
    for index, char in enumerate(text):
        if char == " ":
            continue
        mapping[len(chars)] = index
        chars.append(char)
    return "".join(chars), mapping


def final_text_span(pred_text, orig_text, lower_case):
    """(first, last) character of `orig_text` (original words joined by spaces) that `pred_text` (the word
    pieces joined) covers, aligning character by character after re-tokenizing; None when that fails."""
    tok_text = " ".join(_basic_tokenize(orig_text, lower_case))
    start = tok_text.find(pred_text)
    if start == -1:
        return None
    end = start + len(pred_text) - 1
    orig_ns, orig_map = _strip_spaces(orig_text)
    tok_ns, tok_map = _strip_spaces(tok_text)
    if len(orig_ns) != len(tok_ns):
        return None
    tok_to_ns = {value: key for key, value in tok_map.items()}
    if start not in tok_to_ns or tok_to_ns[start] not in orig_map:
        return None
    if end not in tok_to_ns or tok_to_ns[end] not in orig_map:
        return None
    return orig_map[tok_to_ns[start]], orig_map[tok_to_ns[end]]


def get_final_text(pred_text, orig_text, lower_case):
    """The span of `orig_text` that `pred_text` covers (final_text_span); `orig_text` when that fails."""
    span = final_text_span(pred_text, orig_text, lower_case)
    return orig_text if span is None else orig_text[span[0]:span[1] + 1]


def span_text(window, example, tokenizer, start, end, lower_case):
    """The answer text of pieces start..end of a window."""
    return answer_and_offsets(window, example, tokenizer, start, end, lower_case)[0]


def answer_and_offsets(window, example, tokenizer, start, end, lower_case):
    """(the answer text of pieces start..end of a window, its first character in the example's context,
    the character after its last): the text get_final_text gives, placed in the context it came from."""
    pieces = tokenizer.convert_ids_to_tokens(window.input_ids[start:end + 1])
    tok_text = " ".join(pieces).replace(" ##", "").replace("##", "").strip()
    tok_text = " ".join(tok_text.split())
    first, last = window.token_to_orig[start], window.token_to_orig[end]
    words = example.paragraph.doc_tokens[first:last + 1]
    orig_text = " ".join(words)
    span = final_text_span(tok_text, orig_text, lower_case) or (0, len(orig_text) - 1)
    # orig_text joins the words with one space each; in the context each word is contiguous characters
    starts = {}
    for position, word in enumerate(example.paragraph.char_to_word):
        if first <= word <= last and word not in starts and not is_whitespace(example.paragraph.context[position]):
            starts[word] = position
    offsets = []  # orig_text's characters → the context's (None at the joining spaces)
    for word_index, word in enumerate(words, first):
        offsets += [starts[word_index] + i for i in range(len(word))] + [None]
    return orig_text[span[0]:span[1] + 1], offsets[span[0]], offsets[span[1]] + 1


def best_candidate(window_indices, windows, outputs, config):
    """(score, window index, start, end) of a question's best span over its windows, or None when no
    candidate is valid (the original's rules: both ends in the context, the start where its window gives
    it the most context, end ≥ start, at most max_answer_length pieces)."""
    candidates = []
    for index in window_indices:
        window = windows[index]
        starts = outputs["start_top_index"][index]
        for i, start in enumerate(starts):
            for j, end in enumerate(outputs["end_top_index"][index][i]):
                start, end = int(start), int(end)
                if start not in window.token_to_orig or end not in window.token_to_orig:
                    continue
                if not window.token_is_max_context.get(start, False):
                    continue
                if end < start or end - start + 1 > config.max_answer_length:
                    continue
                score = float(outputs["start_top_log_probs"][index][i] + outputs["end_top_log_probs"][index][i][j])
                candidates.append((score, index, start, end))
    return max(candidates, key=lambda c: c[0]) if candidates else None


def predict_answers(examples, windows, outputs, tokenizer, config, lower_case):
    """({qas_id: best non-null text}, {qas_id: null odds}) from the span head's beams per window."""
    by_example = {}
    for index, window in enumerate(windows):
        by_example.setdefault(window.example_index, []).append(index)
    predictions, null_odds = {}, {}
    for example_index, window_indices in by_example.items():
        example = examples[example_index]
        null_odds[example.qas_id] = min(float(outputs["answerable_logit"][index]) for index in window_indices)
        best = best_candidate(window_indices, windows, outputs, config)
        if best is not None:
            _, index, start, end = best
            predictions[example.qas_id] = span_text(windows[index], example, tokenizer, start, end, lower_case)
        else:
            predictions[example.qas_id] = "empty"  # the original's placeholder when no span is valid
    return predictions, null_odds
