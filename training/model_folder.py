"""Moved to storage.model_folder (the storage layer below training/, finetune/ and checkpoints/).

This name stays only so that code not yet switched (bench/, studies/, work in progress elsewhere) keeps
importing; new code imports storage.model_folder.
"""
from storage.model_folder import *  # noqa: F401,F403
from storage.model_folder import __all__  # noqa: F401
