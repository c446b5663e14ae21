"""The pipeline a command runs, from kernel folders to settled cells and written reports.

A run is fixed once (context), goes through the stages its command picks from one list
(stages: load, compile, check, run, sanitize, one module each), and every cell it settles goes
to its results, which hand it to the sinks (the report's files, the console). comparing is the
same-GPU A/B; sharding, `test --shard`. harness.commands parses arguments, calls one of these
and prints what it returns.
"""
