"""`python -m candor.cli`, as the tests and benchmarks run it."""

from candor.cli import main

raise SystemExit(main())
