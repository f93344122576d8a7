"""``python -m monk_framework`` runs the ``monkfw`` command line."""

from monk_framework.app.cli import main

main()
