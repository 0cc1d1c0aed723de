"""File names inside a run's reports folder (``reports/<dataset>/<run>/``) and of the compare stage's output.

One place for the names the ``evaluate`` stage writes and ``compare`` and ``report`` read; the
folders themselves are given on the command line (dvc.yaml).
"""

PER_QUERY = "per_query.json"  # per query: measures, first positive rank, ranks of the positives, seen
RECALL_CURVE = "recall_curve.csv"  # k,recall for k = 1..depth
FIRST_POSITIVE_RANKS = "first_positive_ranks.csv"
FIRST_POSITIVE_HIST = "first_positive_hist.csv"
DIAGNOSIS = "diagnosis.json"  # failure classes of queries without a positive in the top diagnose_k
DIAGNOSIS_MD = "diagnosis.md"
EVALUATE = (PER_QUERY, RECALL_CURVE, FIRST_POSITIVE_RANKS, FIRST_POSITIVE_HIST, DIAGNOSIS, DIAGNOSIS_MD)  # all it writes
COMPARE = "compare.json"  # the compare stage's metrics file (metrics/<dataset>/compare.json)
