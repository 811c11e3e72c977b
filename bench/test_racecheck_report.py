"""bench/tools/racecheck_report.py: the sm90 loop's reports are listed, any other fails."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools"))

import racecheck_report  # noqa: E402

SM90 = """========= Error: Race reported between Read access at void attnjit::sm90::Mainloop<attnjit::bf16_t, (int)128>::run<Variant, Params>(const T2 &)+0x430 in mainloop.cuh:304
=========     and Write access at void attnjit::sm90::Mainloop<attnjit::bf16_t, (int)128>::run<Variant, Params>(const T2 &)+0x8400 in mainloop.cuh:179 [128 hazards]
"""
# A read in common code inlined into the sm90 backward: still the sm90 kernel's.
SM90_COMMON = """========= Error: Race reported between Write access at void attnjit::sm90::BackwardDkdv<attnjit::bf16_t>::run_dkdv<Variant, Params>(const T1 &)+0x9780 in backward_dkdv.cuh:271
=========     and Read access at void attnjit::BackwardScores<Variant, Params>::pass<attnjit::sm80::MmaCLayout<(int)1>>(const T4 &) const+0x1290 in backward_scores.cuh:210 [352 hazards]
"""
SM80 = """========= Error: Race reported between Write access at void attnjit::sm80::Mainloop<attnjit::bf16_t>::run<Variant, Params>(const T2 &)+0x100 in mainloop.cuh:90
=========     and Read access at void attnjit::sm80::Mainloop<attnjit::bf16_t>::run<Variant, Params>(const T2 &)+0x200 in mainloop.cuh:120 [4 hazards]
"""


def run(tmp_path, text, capsys):
    log = tmp_path / "racecheck.log"
    log.write_text("[ RUN      ] Matrix/Forward.x\n" + text + "[       OK ] Matrix/Forward.x (1 ms)\n")
    rc = racecheck_report.main(str(log))
    return rc, capsys.readouterr().out


def test_sm90_reports_are_listed_not_failed(tmp_path, capsys):
    rc, out = run(tmp_path, SM90 + SM90_COMMON, capsys)
    assert rc == 0
    assert "sm90: read mainloop.cuh:304 / write mainloop.cuh:179: 1 report(s)" in out
    assert "sm90: write backward_dkdv.cuh:271 / read backward_scores.cuh:210: 1 report(s)" in out
    assert "2 report(s) in sm90 kernels" in out and "0 elsewhere" in out


def test_a_report_outside_the_sm90_loop_fails(tmp_path, capsys):
    rc, out = run(tmp_path, SM90 + SM80, capsys)
    assert rc == 1
    assert "other: write mainloop.cuh:90 / read mainloop.cuh:120: 1 report(s)" in out
    assert "1 elsewhere" in out


def test_strict_fails_on_sm90_reports_too(tmp_path, capsys):
    log = tmp_path / "racecheck.log"
    log.write_text(SM90)
    assert racecheck_report.main(str(log), strict=True) == 1
    assert racecheck_report.main(str(log)) == 0


def test_a_clean_log_passes(tmp_path, capsys):
    rc, out = run(tmp_path, "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n", capsys)
    assert rc == 0
    assert "0 report(s) in sm90 kernels" in out and "0 elsewhere" in out
