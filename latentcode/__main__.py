"""`python -m latentcode` runs the command-line interface."""

from latentcode.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
