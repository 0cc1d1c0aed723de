"""Entry point kept for the documented command: the code is `retrieval_lab.publishing.benchmarks`."""

import sys

from retrieval_lab.publishing.benchmarks import main

if __name__ == "__main__":
    sys.exit(main())
