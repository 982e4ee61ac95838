"""Our variables under the original's TF1 checkpoint names (docs/reproduction.md#checkpoint-names).

The map is built from the model's structure, not from Keras variable paths, so it holds whatever scope
Keras happened to build a layer under. Kernels are [in, out] as in TF1; LayerNorm weights are
gamma/beta. The one name that is not TF1's is `electra/embeddings/word_embeddings_delta` (present only
with gradient-disentangled embeddings): exporters write `word_embeddings + delta` as the discriminator's
`electra/embeddings/word_embeddings` (see ElectraPretrainer.merged_discriminator_embeddings).
"""


def _dense(prefix, dense):
    return {f"{prefix}/kernel": dense.kernel, f"{prefix}/bias": dense.bias}


def _layer_norm(prefix, layer_norm):
    return {f"{prefix}/gamma": layer_norm.gamma, f"{prefix}/beta": layer_norm.beta}


def embeddings_name_map(embeddings, scope):
    prefix = f"{scope}/embeddings"
    names = {f"{prefix}/word_embeddings": embeddings.word_embeddings,
             f"{prefix}/position_embeddings": embeddings.position_embeddings,
             f"{prefix}/token_type_embeddings": embeddings.token_type_embeddings}
    names.update(_layer_norm(f"{prefix}/LayerNorm", embeddings.layer_norm))
    return names


def transformer_layer_name_map(layer, prefix):
    names = {}
    for projection in ("query", "key", "value"):
        names.update(_dense(f"{prefix}/attention/self/{projection}",
                            getattr(layer.attention_self, projection)))
    names.update(_dense(f"{prefix}/attention/output/dense", layer.attention_output_dense))
    names.update(_layer_norm(f"{prefix}/attention/output/LayerNorm", layer.attention_output_layer_norm))
    names.update(_dense(f"{prefix}/intermediate/dense", layer.intermediate_dense))
    names.update(_dense(f"{prefix}/output/dense", layer.output_dense))
    names.update(_layer_norm(f"{prefix}/output/LayerNorm", layer.output_layer_norm))
    return names


def encoder_name_map(encoder, scope=None, include_embeddings=True):
    """TF1 names of one BertEncoder (scope defaults to its name: "electra" or "generator")."""
    scope = scope or encoder.name
    names = embeddings_name_map(encoder.embeddings, scope) if include_embeddings else {}
    if encoder.gdes_embeddings:
        names[f"{scope}/embeddings/word_embeddings_delta"] = encoder.word_embeddings_delta
    if encoder.embeddings_project is not None:
        names.update(_dense(f"{scope}/embeddings_project", encoder.embeddings_project))
    for index, layer in enumerate(encoder.transformer_layers):
        names.update(transformer_layer_name_map(layer, f"{scope}/encoder/layer_{index}"))
    return names


def tf1_name_map(pretrainer):
    """{TF1 name: keras.Variable} for every weight of an ElectraPretrainer.

    Shared embeddings are named once, under the discriminator's scope "electra"; untied generator
    embeddings read `generator/embeddings/...`. The MLM-only model is "electra" + generator_predictions.
    Electric's two-tower generator is `generator_ltr/...` and `generator_rtl/...` (untied embeddings: each
    tower's own `generator_{ltr,rtl}/embeddings/...`) with the head `cloze_predictions/...`.
    """
    names = {}
    seen_embeddings = []
    for encoder in pretrainer.encoders():
        owns = not any(encoder.embeddings is seen for seen in seen_embeddings)
        seen_embeddings.append(encoder.embeddings)
        names.update(encoder_name_map(encoder, include_embeddings=owns))
    head = pretrainer.generator_head
    if head is not None:  # generator_predictions, or cloze_predictions (the layer's name is its TF1 scope)
        names.update(_dense(f"{head.name}/dense", head.dense))
        names.update(_layer_norm(f"{head.name}/LayerNorm", head.layer_norm))
        names[f"{head.name}/output_bias"] = head.output_bias
    head = pretrainer.discriminator_head
    if head is not None:
        names.update(_dense("discriminator_predictions/dense", head.dense))
        names.update(_dense("discriminator_predictions/dense_1", head.dense_1))
    return names
