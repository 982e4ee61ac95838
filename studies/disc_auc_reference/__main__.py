"""`python -m studies.disc_auc_reference` (the study is __init__.py; README.md has its question, command and answer)."""
from studies.disc_auc_reference import main

main()
