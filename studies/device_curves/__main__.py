"""`python -m studies.device_curves` (the study is __init__.py; README.md has its question, command and answer)."""
from studies.device_curves import main

main()
