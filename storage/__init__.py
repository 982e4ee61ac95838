"""The storage layer: a model folder on disk (config, vocabulary, checkpoint state file, checkpoints,
restoring weights), below every package that uses one (training/, finetune/, checkpoints/, inference/,
the studies), so that they agree on what a folder means and none of them reads its files by name.
storage.model_folder reads and writes a folder, storage.resume says whether a run may continue one, and
storage.folder_lock keeps to one writer at a time. They import nothing above configs/ and data/ and build
no model: weights are restored into a model the caller built (pretrain.loaded_folder builds and restores)."""
