"""Every number the README and the documentation site publish, rendered from committed JSON.

One package renders them all: ``benchmarks`` (docs/benchmarks.md from ``bench-results/``), ``spread``
(the spread over training seeds), ``ablation`` (an ablation's folder, gathered from experiments),
``experiments`` (the worked example of ``retrieval-lab table``), ``params_reference`` (the
parameters page, from the params schema) and ``blocks`` (the tables between
``<!-- BEGIN generated:NAME -->`` and ``<!-- END generated:NAME -->`` in README.md and docs/).
``python -m retrieval_lab.publishing`` rewrites every generated block and page; ``--check`` changes
nothing and exits 1 naming each one that differs from what the committed files give.
"""

from __future__ import annotations

from pathlib import Path

# the repository these files are published in: a source checkout (``pip install -e``)
REPO = Path(__file__).resolve().parents[3]
