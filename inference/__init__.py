"""Using a trained model: the replaced-token inspector (python -m inference.inspect_model), the Electric scorer
(python -m inference.score) and predictions on new text with a fine-tuned model (python -m
inference.predict). Beside training/, not inside it: these read a finished model folder through storage/
(a fine-tuned one through finetune's reader, heads and featurisation, so that predictions are fine-tuning's
own) and import nothing of a training loop."""
