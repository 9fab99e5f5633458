"""`python -m groupscore` is the `groupscore` command."""

from groupscore.cli import main

raise SystemExit(main())
