"""Pallas GPU kernels, one op a folder (kernel.py, ref.py, api.py). Importing the package installs the
lowering hook of DGJAX_PDL_TRIGGER (pdl.py), a pass-through while the switch is off (the default)."""

from dgjax.pallas import pdl as _pdl

_pdl.install()
