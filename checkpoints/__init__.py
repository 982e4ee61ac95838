"""Checkpoint interop: the name rules ours ↔ TF1 ↔ Hugging Face ↔ BERT ↔ keras-hub, and the readers and writers.

    python -m checkpoints.export --model-dir <model folder> --format {tf1,bert,hf,keras_hub,saved_model} \
        --output <dir>
    python -m checkpoints.import_weights --source <TF1 checkpoint | Hugging Face folder | keras-hub preset> \
        --model-name <name>

Imports write a normal model folder (config.json, vocabulary, a checkpoint in our format), so
`run_pretraining.py --init-checkpoint` and fine-tuning read them like any pretrained model. TensorFlow is
allowed here (unlike model/ and pretrain/). See docs/checkpoints.md.
"""
