"""The RTD-vs-MLM study (bench/rtd_vs_mlm.py is its command line), by job: the plan and its equal-FLOPs
budgets (plan.py), the stages that run the project's scripts (stages.py), the table and figures
(report.py), and the moves to an accelerator without TensorFlow and back (device.py)."""
