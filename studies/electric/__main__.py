"""`python -m studies.electric`: the Electric ranking's command line (cli.py)."""
from studies.electric.cli import main

main()
