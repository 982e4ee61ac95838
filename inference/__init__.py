"""Using a trained model: the replaced-token inspector (python -m inference.inspect_model), the Electric scorer
(python -m inference.score) and predictions on new text with a fine-tuned model (python -m
inference.predict). Beside training/, not inside it: these read a finished model folder through storage/
(a fine-tuned one through finetune's reader, heads and featurisation, so that predictions are fine-tuning's
own) and import nothing of a training loop.

Predictions, one job a module: sources.py (which model a path means), predictors.py (the fine-tuned folder's
Keras model, its ONNX export through onnx_folder.py, its SavedModel), outputs.py (the JSON object a row
becomes), inputs.py and rows.py (the rows read, checked and windowed) and predict.py (the command)."""
