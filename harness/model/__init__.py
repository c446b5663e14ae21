"""The model every stage reads: the matrix, kernel discovery and the result model (the spec
API, harness.spec and harness.vendor, sits beside it where every spec imports it)."""
