"""``python -m ralp_tf.cli``: the ``ralp-tf`` program."""
import sys

from ralp_tf.cli.main import console_main

sys.exit(console_main())
