"""`python -m studies.rtd_vs_mlm`: the study's command line (cli.py)."""
from studies.rtd_vs_mlm.cli import main

main()
