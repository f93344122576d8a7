"""``python -m monk_framework`` runs the ``monkfw`` command line."""

from .cli import main

main()
