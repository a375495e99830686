"""`python -m neuron_customcall` is the same as the `neuron-customcall` console script."""
from neuron_customcall.cli import main

raise SystemExit(main())
