"""``python -m hf_bpe``: the ``hf-bpe`` command line."""

import sys

from hf_bpe.cli import main

sys.exit(main())
