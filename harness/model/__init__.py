"""The model every stage reads: the matrix, kernel discovery and the result model (the spec
API, harness.spec (the model's spec.py, re-exported) and harness.vendor, sits above it)."""
