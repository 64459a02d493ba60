"""``python -m bat.cli``: the same program as the ``bat`` console script."""

from bat.cli.program import main

main()
