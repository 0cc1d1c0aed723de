"""Exit codes shared by the CLI and the gate (one place: the command's help and the gate's decision)."""

REGRESSION = 1  # report --fail-on-regression: a key measure's whole interval lies below -tolerance
BAD_INPUT = 2  # every command: a one-line error (cli.main)
CANNOT_JUDGE = 3  # report --fail-on-regression: a retriever the gate cannot see; it fails closed
