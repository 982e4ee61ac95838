"""Fine-tuning tasks of the user's own files: spec.py (what the flags or a --task-spec file say), tables.py
(CSV, TSV and JSON-lines rows), task.py (classification, regression and tagging Tasks)."""
