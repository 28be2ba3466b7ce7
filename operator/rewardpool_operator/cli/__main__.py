"""`python -m rewardpool_operator.cli`: the images' entry point."""
import sys

from . import main

sys.exit(main())
