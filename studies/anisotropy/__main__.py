"""`python -m studies.anisotropy` (the study is __init__.py; README.md has its question, command and answer)."""
from studies.anisotropy import main

main()
