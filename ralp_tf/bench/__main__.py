"""``python -m ralp_tf.bench _profile MODEL BATCH OUT``: the profiling helper process only (the
benchmark itself is ``ralp-tf bench``)."""
from __future__ import annotations

import sys

from ralp_tf.bench.predictions import profile_main

if len(sys.argv) >= 2 and sys.argv[1] == "_profile":
    sys.exit(profile_main(sys.argv[2:]))
print("usage: ralp-tf bench ... (python -m ralp_tf.bench is only the profiling helper)", file=sys.stderr)
sys.exit(2)
