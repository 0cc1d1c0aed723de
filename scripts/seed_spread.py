"""Entry point kept for the documented command: the code is `retrieval_lab.publishing.spread`."""

import sys

from retrieval_lab.publishing.spread import main

if __name__ == "__main__":
    sys.exit(main())
