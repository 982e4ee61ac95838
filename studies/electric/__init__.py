"""Electric's text score and word order (README.md): the ranking on Wikipedia (`python -m studies.electric`,
ranking.py), its pretraining and scoring on an accelerator without TensorFlow (device.py), and the synthetic
control language (`python -m studies.electric.synthetic`, synthetic.py)."""
