"""`python -m studies.batch_diversity` (the study is __init__.py; README.md has its question, command and answer)."""
from studies.batch_diversity import main

main()
