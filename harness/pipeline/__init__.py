"""The pipeline a command runs, from kernel folders to settled cells and written reports:
start (select the kernels, read their specs confined, compile, begin the report), testing (each
case on the GPU workers, or checked on the CPU), sanitizing, comparing (same-GPU A/B), sharding,
and console (what a run says on the terminal). harness.commands parses arguments, calls one of
these and prints what it returns.
"""
