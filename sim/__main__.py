"""`python -m sim` runs the prefixsim CLI."""

from sim.cli import main

main()
