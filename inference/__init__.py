"""Using a trained model: the replaced-token inspector (python -m inference.inspect) and the Electric
scorer (python -m inference.score); predictions on new text come next. Beside training/, not inside it:
these read a finished model folder through storage/ and import nothing of the training loop."""
