"""benchmarks/pdl_census.py reads PDL placement out of PTX: waits, global loads issued before the wait,
early triggers, per kernel entry."""

from __future__ import annotations

import pytest

from benchmarks import pdl_census

PTX = """
.visible .entry early_loads(
	.param .u64 early_loads_param_0
)
{
	ld.param.b64 	%rd1, [early_loads_param_0];
	ld.global.nc.v4.b32 	{%r1, %r2, %r3, %r4}, [%rd1];
	cp.async.cg.shared.global [%r5], [%rd1], 16;
	griddepcontrol.wait;
	ld.global.b32 	%r6, [%rd1];
	griddepcontrol.launch_dependents;
	ret;
}
.visible .entry waits_first(
	.param .u64 waits_first_param_0
)
{
	griddepcontrol.wait;
	ld.global.b32 	%r1, [%rd1];
	ret;
}
.visible .entry no_pdl(
	.param .u64 no_pdl_param_0
)
{
	ld.global.b32 	%r1, [%rd1];
	ret;
}
"""


def test_census_counts_loads_before_the_wait_and_triggers(tmp_path):
    rows = {r["kernel"]: r for r in pdl_census.census(PTX)}
    assert rows["early_loads"] == dict(kernel="early_loads", waits=1, loads_before_wait=2, triggers=1)
    assert rows["waits_first"]["loads_before_wait"] == 0 and rows["waits_first"]["triggers"] == 0
    assert rows["no_pdl"]["waits"] == 0 and rows["no_pdl"]["loads_before_wait"] is None
    (tmp_path / "m.ptx").write_text(PTX)
    lines = pdl_census.main(["--ptx-dir", str(tmp_path)])
    assert lines[2] == "| `early_loads` | 1 | 2 | 1 |" and lines[4] == "| `no_pdl` | 0 | - | 0 |"


def test_a_dump_without_ptx_is_an_error_naming_what_it_held(tmp_path):
    """s11e: on the GPU machine's jax 0.11.2 the dump held no PTX and the census printed an empty table."""
    (tmp_path / "module_0001.jit_f.before_optimizations.txt").write_text("HloModule f")
    with pytest.raises(SystemExit, match=r"no kernel .* \(1 files: \.txt\)"):
        pdl_census.main(["--ptx-dir", str(tmp_path)])
