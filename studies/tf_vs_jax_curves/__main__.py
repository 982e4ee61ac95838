"""`python -m studies.tf_vs_jax_curves` (the study is __init__.py; README.md has its question, command and answer)."""
from studies.tf_vs_jax_curves import main

main()
