"""The RTD-vs-MLM study (`python -m studies.rtd_vs_mlm`, its command line in cli.py; README.md holds the
question, the commands and the answers), by job: the plan and its equal-FLOPs budgets (plan.py), the
stages that run the project's scripts (stages.py), the table and figures (report.py), and the moves to an
accelerator without TensorFlow and back (device.py)."""
