"""Tests of the benchmark harness that need no GPU and no torch: report.py on synthetic
JSON lines (skipped, failing and erroring rows included), the case list and its FLOP
fractions, and a byte-compile of every bench/*.py.

    python3 -m pytest bench/test_report.py
"""
import glob
import json
import os
import py_compile
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import cases as C  # noqa: E402
import report  # noqa: E402


def row(impl, variant, N, tflops=None, D=128, H=16, Hkv=16, dtype="bf16", ok=True, **kw):
    r = dict(impl=impl, variant=variant, dtype=dtype, B=16384 // N, H=H, Hkv=Hkv, Nq=N, Nk=N, D=D,
             causal=variant.endswith("causal"), mode="fwd", gpu="h100", gpu_name="NVIDIA H100 80GB HBM3",
             commit="abc1234", date="2026-11-21")
    if tflops is not None:
        r.update(ms=1.0, tflops=tflops, max_err=1e-3 if ok else 0.5, rel_err=1e-3 if ok else 0.2,
                 ok=ok, bad=0 if ok else 17, peak_mib=64.0, compile_s=1.5, deterministic=True)
    elif "host_us" in kw:
        r["ok"] = ok
    r.update(kw)
    return r


def synthetic():
    rows = [dict(kind="env", torch="2.11.0+cu130", cuda="13.0", triton="3.6.0", cudnn=91900, sms=132,
                 python="3.12.3", gpu="h100", gpu_name="NVIDIA H100 80GB HBM3", commit="abc1234")]
    for N in (4096, 16384):
        rows += [row("attnjit", "plain", N, 360), row("sdpa_flash", "plain", N, 340),
                 row("sdpa_cudnn", "plain", N, 600), row("flex", "plain", N, 450),
                 row("naive", "plain", N, 40) if N == 4096 else row("naive", "plain", N, skipped="too big")]
        rows += [row("attnjit", "alibi_causal", N, 300),
                 row("sdpa_flash", "alibi_causal", N, skipped="SDPA's flash backend takes no mask"),
                 row("sdpa_cudnn", "alibi_causal", N, skipped="not emulated"),
                 row("flex", "alibi_causal", N, 350, ok=False),   # fastest but wrong: not 'best'
                 row("naive", "alibi_causal", N, 10)]
    rows += [row("attnjit", "document", 4096, skipped="error: RuntimeError: boom", error="RuntimeError: boom"),
             row("flex", "document", 4096, 200)]
    # pair bias only up to 8192: the README cell falls back to N=8192
    rows += [row("attnjit", "pair_bias", 8192, 250), row("sdpa_cudnn", "pair_bias", 8192, 500),
             row("attnjit", "pair_bias", 16384, skipped="pair bias is 8 GiB"),
             row("sdpa_cudnn", "pair_bias", 16384, skipped="pair bias is 8 GiB")]
    rows += [row("attnjit", "overhead", 128, None, D=64, H=1, Hkv=1, overhead_of="plain", host_us=3.5,
                 host_us_min=3.2, ms=0.006, ok=True, max_err=1e-3),
             row("sdpa_flash", "overhead", 128, None, D=64, H=1, Hkv=1, overhead_of="plain", host_us=12.0,
                 host_us_min=11.0, ms=0.007, ok=True, max_err=1e-3),
             row("flex", "overhead", 128, None, D=64, H=1, Hkv=1, overhead_of="plain", host_us=40.0,
                 host_us_min=35.0, ms=0.01, ok=True, max_err=1e-3)]
    return rows


@pytest.fixture()
def run(tmp_path):
    path = tmp_path / "2026-11-21-h100.jsonl"
    with open(path, "w") as f:
        for r in synthetic():
            f.write(json.dumps(r) + "\n")
        f.write("# a comment line the loader ignores\n")
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Performance\n\n<!-- perf:begin -->\nold\n<!-- perf:end -->\n\ntail\n")
    res = report.write_report([str(path)], readme=str(readme), png=True)
    return res, path, readme


def test_markdown_tables_and_ratios(run):
    res, path, _ = run
    assert res["md"] == str(path)[:-6] + ".md"
    md = open(res["md"]).read()
    assert "## plain, bf16, fwd" in md and "## alibi_causal, bf16, fwd" in md
    # plain N=4096: attnjit 360, best other cuDNN 600 -> 0.60; / flash 360/340 = 1.06; / flex 0.80
    line = next(l for l in md.splitlines() if l.startswith("| 128 | 16/16 | 4 x 4096 | 360"))
    assert "0.60 (cuDNN)" in line and "| 1.06 |" in line and "| 0.80 |" in line
    # naive skipped at 16384 shows '-'
    line = next(l for l in md.splitlines() if l.startswith("| 128 | 16/16 | 1 x 16384 | 360"))
    assert "| - |" in line
    # alibi: flex failed its check -> marked, and not the 'best': naive (10) is -> 30.00
    line = next(l for l in md.splitlines() if "alibi" not in l and l.startswith("| 128 | 16/16 | 4 x 4096 | 300"))
    assert "350 ✗" in line and "30.00 (naive)" in line
    assert "SDPA flash skipped: SDPA's flash backend takes no mask" in md
    # the error is called out, and shown as err in the table
    assert "## Errors" in md and "RuntimeError: boom" in md
    assert "| err |" in md
    # failures listed
    assert "failed checks" in md and "flex alibi_causal bf16 D=128" in md
    # overhead table
    assert "## Per-call overhead" in md and "3.5 (3.2)" in md
    # conventions stated
    assert "4 * B * Hq * Nq * Nk * D" in md and "peak" in md.lower()


def test_fa3_published_beside_plain_and_causal_forward():
    # The published FlashAttention-3 forward (H100, 16k) stands in the N 16384 rows of the plain
    # and causal forward tables, '-' where it published none; no column on other tables.
    rows = [row("attnjit", "plain", 16384, 700, D=256, H=8, Hkv=8), row("sdpa_cudnn", "plain", 16384, 720, D=256, H=8, Hkv=8),
            row("attnjit", "plain", 4096, 650, D=256, H=8, Hkv=8),
            row("attnjit", "plain", 16384, 500, D=96, H=21, Hkv=21),
            row("attnjit", "causal", 16384, 600, D=128), row("attnjit", "alibi_causal", 16384, 400)]
    md = "\n".join(report.perf_sections(rows, {}))
    plain = md[md.index("## plain"):md.index("## causal")]
    assert "FA3 published (H100, 16k)" in plain
    assert next(l for l in plain.splitlines() if l.startswith("| 256 | 8/8 | 1 x 16384")).endswith("| 756 |")
    assert next(l for l in plain.splitlines() if l.startswith("| 256 | 8/8 | 4 x 4096")).endswith("| - |")  # 16k only
    assert next(l for l in plain.splitlines() if l.startswith("| 96 |")).endswith("| - |")
    causal = md[md.index("## causal"):md.index("## alibi_causal")]
    assert next(l for l in causal.splitlines() if l.startswith("| 128 |")).endswith("| 616 |")
    assert "FA3" not in md[md.index("## alibi_causal"):]


def test_readme_section(run):
    res, _, readme = run
    text = readme.read_text()
    assert res["readme"] is True
    assert "old" not in text and text.endswith("<!-- perf:end -->\n\ntail\n")
    sec = text[text.index("<!-- perf:begin -->"):text.index("<!-- perf:end -->")]
    assert len(sec.splitlines()) <= 30
    assert "| plain | 128 | 360 | 0.60 (cuDNN) | 360 | 0.60 (cuDNN) |" in sec
    # pair bias has no N=16384: falls back to 8192 for both columns
    assert "250 (N=8192)" in sec and "0.50 (cuDNN)" in sec
    # alibi: the only anchor (flex) failed -> no ratio
    assert "| alibi_causal | 128 | 300 | - |" in sec
    assert "attnjit 3.5 us" in sec and "NVIDIA H100" in sec and "`abc1234`" in sec
    assert "(2026-11-21-h100.md)" in sec
    assert "1 error(s)" in sec


def test_readme_fwdbwd_table():
    # fwdbwd rows give a second table at the largest N: attnjit, fast, / flash, / best anchor.
    rows = [row("attnjit", "plain", N, 250, mode="fwdbwd") for N in (4096, 8192)]
    rows += [row("attnjit_fast", "plain", 8192, 275, mode="fwdbwd"), row("sdpa_flash", "plain", 8192, 300, mode="fwdbwd"),
             row("sdpa_cudnn", "plain", 8192, 500, mode="fwdbwd"), row("flex", "plain", 8192, 1000, mode="fwdbwd", ok=False)]
    sec = "\n".join(report.readme_section(rows, "x.md"))
    assert "| plain | 128 | 8192 | 250 | 275 | 0.83 | 0.50 (cuDNN) |" in sec
    assert "| 4096 |" not in sec


def test_readme_fwdbwd_caveat():
    # ALiBi's fwd+bwd beside a FlexAttention slowed by its slopes' gradient: marked, and said once.
    rows = [row("attnjit", "alibi_causal", N, 250, mode="fwdbwd", D=D) for N in (4096, 16384) for D in (64, 128)]
    rows += [row("flex", "alibi_causal", N, 1.0, mode="fwdbwd", dslopes_max_err=1.0, D=D)
             for N in (4096, 16384) for D in (64, 128)]
    rows += [row("attnjit", "softcap_causal", 16384, 380, mode="fwdbwd"),
             row("flex", "softcap_causal", 16384, 195, mode="fwdbwd")]
    sec = "\n".join(report.readme_section(rows, "x.md"))
    assert "| alibi_causal | 128 | 16384 | 250 | - | - | 250.00 (flex) * |" in sec
    assert "| alibi_causal | 64 | 16384 | 250 | - | - | 250.00 (flex) * |" in sec  # two rows, one note
    assert "| softcap_causal | 128 | 16384 | 380 | - | - | 1.95 (flex) |" in sec
    assert sec.count("\\* alibi_causal: the ALiBi slopes were trained in this run") == 1
    # Fixed slopes (the harness since): no mark, no note.
    rows = [r for r in rows if r["variant"] == "alibi_causal"]
    for r in rows:
        r.pop("dslopes_max_err", None)
    sec = "\n".join(report.readme_section(rows, "x.md"))
    assert "| alibi_causal | 128 | 16384 | 250 | - | - | 250.00 (flex) |" in sec and "\\*" not in sec


def test_readme_without_markers(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in synthetic()) + "\n")
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    res = report.write_report([str(path)], readme=str(readme), png=False)
    assert res["readme"] is False and readme.read_text() == "# no markers\n"
    out = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), str(path), "--readme", str(readme),
                          "--no-png"], capture_output=True, text=True)
    assert out.returncode == 0 and "not found" in out.stdout and "| variant | D |" in out.stdout


def test_pngs(run):
    pytest.importorskip("matplotlib")
    res, path, _ = run
    pngs = res["pngs"]
    assert any(p.endswith("-plain-bf16.png") for p in pngs)
    for p in pngs:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert "![plain bf16](2026-11-21-h100-plain-bf16.png)" in open(res["md"]).read()
    # the summary plot of attnjit / best other, linked at the top of the summary
    assert any(p.endswith("-ratio.png") for p in pngs)
    assert "![attnjit / best](2026-11-21-h100-ratio.png)" in open(res["md"]).read()


def test_best_other_is_never_attnjit_and_reasons_are_whole():
    # attnjit_fast (attnjit's own fast backward) is not a competitor in the ratios
    cell = {"attnjit": row("attnjit", "plain", 8192, 200, mode="fwdbwd"),
            "attnjit_fast": row("attnjit_fast", "plain", 8192, 400, mode="fwdbwd"),
            "flex": row("flex", "plain", 8192, 300, mode="fwdbwd")}
    assert report.best_other(cell) == ("flex", 300)
    assert [p[2] for p in report.ratio_points(list(cell.values()))] == ["flex"]
    why = "the backend refused the case at run time because " + "x" * 120
    ov = [row("flex", "overhead", 128, None, D=64, H=1, Hkv=1, overhead_of="plain", skipped=why)]
    assert why in "\n".join(report.overhead_section(ov))


def test_attnjit_missing_is_said(tmp_path):
    path = tmp_path / "r.jsonl"
    rows = [row("attnjit", "plain", 4096, skipped="import attnjit failed: no library"),
            row("sdpa_flash", "plain", 4096, 300)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- perf:begin -->\n<!-- perf:end -->\n")
    report.write_report([str(path)], readme=str(readme), png=False)
    assert "attnjit measured nothing in this run: import attnjit failed" in readme.read_text()


def test_later_rows_replace_earlier(tmp_path):
    a, b = tmp_path / "x-piece1of2.jsonl", tmp_path / "x-piece2of2.jsonl"
    a.write_text(json.dumps(row("attnjit", "plain", 4096, 100)) + "\n")
    b.write_text(json.dumps(row("attnjit", "plain", 4096, 200)) + "\n")
    rows, _ = report.load([str(a), str(b)])
    assert len(rows) == 1 and rows[0]["tflops"] == 200
    assert report.default_md(str(a)) == str(tmp_path / "x.md")


# ---------------------------------------------------------------- the case list
def test_case_list():
    cs = C.all_cases()
    assert len(cs) == 208  # per dtype: 71 before (plain, causal at D 64, 128, 256), 4 mta_conv, 4 msa_row, 4 msa_col, 5 reciprocal_band, 16 latent
    ra = [c for c in cs if c.variant == "reciprocal_band" and c.dtype == "bf16"]
    assert [(c.B, c.N) for c in ra] == [(16, 1024), (8, 2048), (4, 4096), (2, 8192), (1, 16384)]
    assert all(c.causal and c.flop_fraction() == 0.5 and c.D == 128 and c.H == 16 for c in ra)
    assert C.runs(ra[0], "flex") and not C.runs(ra[0], "attnjit") and not C.runs(ra[0], "naive")
    mta = [c for c in cs if c.variant == "mta_conv" and c.dtype == "bf16"]
    assert [(c.B, c.N) for c in mta] == [(16, 1024), (8, 2048), (4, 4096), (2, 8192)] and all(c.causal for c in mta)
    assert C.runs(mta[0], "flex") and not C.runs(mta[0], "attnjit") and not C.runs(mta[0], "naive")
    # FlexAttention's FLASH backend is an anchor with flex's limits (its own availability is
    # checked on the GPU machine, where a missing backend becomes a skipped row with the reason).
    assert "flex_flash" in C.ANCHORS and C.runs(ra[0], "flex_flash") and C.runs(mta[0], "flex_flash")
    assert not C.runs(plain_case := next(c for c in cs if c.variant == "causal"), "flex_flash"), plain_case
    msa = {(c.variant, c.B, c.N) for c in cs if c.variant.startswith("msa") and c.dtype == "bf16"}
    assert ("msa_row", 512, 768) in msa and ("msa_col", 768, 512) in msa and len(msa) == 8
    plain = [c for c in cs if c.variant == "plain" and c.dtype == "bf16"]
    assert {(c.D, c.H) for c in plain} == {(64, 32), (128, 16), (256, 8)}
    assert all(c.B * c.N == 16384 and c.H * c.D == 2048 for c in plain)
    gqa = [c for c in cs if c.variant.startswith("gqa")]
    assert all(c.H == 32 and c.Hkv == 8 and c.D == 64 for c in gqa)
    pb = {c.N: c.case_skip() for c in cs if c.variant == "pair_bias" and c.dtype == "bf16"}
    assert pb[16384] and not pb[8192]


def test_latent_cases():
    """H 16 and 128, L 256 and 512 (L a field: both appear), D = Dv = 128, causal, N 1024 to
    8192 at B * N = 16384; fwd and fwdbwd; attnjit, unfused and naive run it."""
    cs = [c for c in C.all_cases(modes=C.MODES) if c.variant == "latent"]
    assert len(cs) == 64 and {c.mode for c in cs} == {"fwd", "fwdbwd"}
    bf16 = [c for c in cs if c.dtype == "bf16"]
    assert {(c.H, c.L) for c in bf16} == {(16, 256), (16, 512), (128, 256), (128, 512)}
    assert sorted({c.N for c in bf16}) == [1024, 2048, 4096, 8192]
    assert all(c.B * c.N == 16384 and c.D == 128 and c.Hkv == 1 and c.causal for c in bf16)
    c = C.Case("latent", "bf16", 2, 128, 1, 8192, 128, "fwd", 512)
    assert c.name == "latent/bf16/fwd/D128/L512/H128x1/B2xN8192" and c.row()["L"] == 512
    assert "L" not in C.Case("causal", "bf16", 2, 16, 16, 8192, 128).row()
    assert c.flops() == 4 * 2 * 128 * 8192 ** 2 * 512 * 0.5 + 2 * 2 * 128 * 8192 * (128 * 512 + 512 * 128)
    assert [i for i in C.IMPLS if not C.runs(c, i)] == ["attnjit", "unfused"]  # naive: 17 Gi scores
    small = C.Case("latent", "bf16", 2, 16, 1, 8192, 128, "fwd", 256)
    assert [i for i in C.IMPLS if not C.runs(small, i)] == ["attnjit", "naive", "unfused"]
    assert C.runs(C.Case("latent", "bf16", 16, 128, 1, 1024, 128, "fwd", 512), "naive") is None
    assert "naive would materialise" in C.runs(C.Case("latent", "bf16", 8, 128, 1, 2048, 128, "fwd", 512), "naive")
    assert C.runs(C.Case("causal", "bf16", 16, 16, 16, 1024, 128), "unfused")


def test_latent_rows_of_each_l_keep_their_own_cells(tmp_path):
    rows = []
    for L, t in ((256, 300), (512, None)):
        rows += [row("attnjit", "latent", 4096, t, H=128, Hkv=1, L=L, **({} if t else {"skipped": "attnjit refused"})),
                 row("unfused", "latent", 4096, 100 + L / 8, H=128, Hkv=1, L=L, sdpa_backend="efficient_attention")]
    path = tmp_path / "x.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    loaded, _ = report.load([str(path)])
    assert len(loaded) == 4
    cells = report.groups(loaded)[("latent", "bf16", "fwd")]
    assert set(cells) == {("128 L256", 128, 1, 4, 4096), ("128 L512", 128, 1, 4, 4096)}
    md = open(report.write_report([str(path)], png=False)["md"]).read()
    assert "| 128 L256 | 128/1 | 4 x 4096 |" in md and "| 128 L512 | 128/1 | 4 x 4096 |" in md


def test_flop_fractions():
    mk = lambda v, N: C.Case(v, "bf16", 16384 // N, 16, 16, N, 128)
    assert mk("plain", 1024).flop_fraction() == 1.0
    assert mk("causal", 1024).flop_fraction() == 0.5
    assert mk("alibi_causal", 4096).flop_fraction() == 0.5
    # window: brute force on a small N
    for N, w in ((10, 3), (5, 8), (7, 7)):
        brute = sum(1 for i in range(N) for j in range(N) if 0 <= i - j < w)
        assert C.window_pairs(N, w) == brute
    c = mk("sliding_window", 4096)
    assert c.flop_fraction() == C.window_pairs(4096, 1024) / 4096**2
    assert mk("sliding_window", 1024).flop_fraction() == pytest.approx(1025 / 2048)
    # documents: brute force over doc ids, deterministic
    ids = C.doc_ids(2, 64)
    brute = sum(1 for b in range(2) for i in range(64) for j in range(64) if ids[b][i] == ids[b][j])
    assert C.flop_fraction(C.Case("document", "bf16", 2, 16, 16, 64, 128)) == brute / (2 * 64 * 64)
    assert C.doc_lengths(4, 1024) == C.doc_lengths(4, 1024)
    assert all(sum(r) == 1024 and min(r) > 0 for r in C.doc_lengths(16, 1024))
    assert mk("plain", 4096).flops() == 4 * 4 * 16 * 4096 * 4096 * 128


def test_pieces_cover_everything_once():
    cs = C.all_cases()
    for n in (1, 2, 3, 5):
        pieces = C.split_pieces(cs, n)
        assert [c for p in pieces for c in p] == cs
        est = [sum(C.estimate_all(p)) for p in pieces]
        assert max(est) < 1.6 * sum(est) / n + 10


def test_list_runs_without_torch():
    out = subprocess.run([sys.executable, os.path.join(HERE, "bench_attention.py"), "--list", "--quick"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "6 cases" in out.stderr and "document/bf16" in out.stderr


def test_bench_files_compile(tmp_path):
    files = glob.glob(os.path.join(HERE, "*.py"))
    assert len(files) >= 8
    for f in files:
        py_compile.compile(f, cfile=str(tmp_path / (os.path.basename(f) + "c")), doraise=True)


def test_autotune_adds_the_tuned_attnjit_only_when_asked():
    """--autotune (or --impl attnjit_tuned) runs attnjit.compile(autotune=True) beside attnjit;
    the default list leaves it out (its tuning costs ~20 s a case)."""
    import bench_attention as B
    assert "attnjit_tuned" not in B.impls(B.parse_args([]))
    assert B.impls(B.parse_args(["--autotune"]))[:2] == ["attnjit", "attnjit_tuned"]
    assert B.impls(B.parse_args(["--impl", "flex", "--autotune"])) == ["attnjit_tuned", "flex"]
    assert B.impls(B.parse_args(["--impl", "attnjit_tuned"])) == ["attnjit_tuned"]
    case = C.Case("causal", "bf16", 4, 16, 16, 4096, 128)
    assert C.runs(case, "attnjit_tuned") is None
    assert C.estimate_s(case, ["attnjit_tuned"]) > C.estimate_s(case, ["attnjit"]) + 10


def test_case_filter_keeps_whole_name_matches():
    import bench_attention as B
    sel, _ = B.plan(B.parse_args(["--case", "causal/bf16/fwd/D128/.*N16384", "--case", "msa_row/bf16/fwd/.*N256"]))
    assert sorted(c.name for c in sel) == ["causal/bf16/fwd/D128/H16x16/B1xN16384",
                                           "msa_row/bf16/fwd/D32/H8x8/B128xN256",
                                           "msa_row/bf16/fwd/D32/H8x8/B512xN256"]
    # The whole name: "causal/..." does not pick alibi_causal's or gqa_causal's cases.
    with pytest.raises(SystemExit):
        B.parse_args(["--case", "("])


def test_tuning_section(tmp_path):
    rows = [row("attnjit", "causal", 4096, 400), row("attnjit_tuned", "causal", 4096, 460, compile_s=9.5),
            row("attnjit", "plain", 16384, 500), row("attnjit_tuned", "plain", 16384, 475, compile_s=0.2),
            row("attnjit", "document", 4096, 300), row("attnjit_tuned", "document", 4096, skipped="err")]
    lines = "\n".join(report.tuning_section(rows))
    assert "2 cases: tuned / default from 0.95 to 1.15 (median 1.05); 1 at 1.10x or more, 1 below 0.98x" in lines
    assert "| causal bf16 D=128 H=16/16 B=4 N=4096 | 400 | 460 | 1.15 | - | 9.5 |" in lines
    assert "document" not in lines
    assert report.tuning_section([row("attnjit", "causal", 4096, 400)]) == []
    # Timings in turns decide where both rows have them: 1.0 ms against 0.99 ms is 1.01, not 0.95.
    rows[2]["ms_alternating"], rows[3]["ms_alternating"] = [1.0, 1.02, 0.98], [0.99, 0.99, 1.5]
    lines = "\n".join(report.tuning_section(rows))
    assert "| plain bf16 D=128 H=16/16 B=1 N=16384 | 500 | 475 | 0.95 | 1.01 | 0.2 |" in lines
    assert "from 1.01 to 1.15" in lines and "0 below 0.98x" in lines


def test_autotune_times_default_and_tuned_in_turns(monkeypatch):
    """With both timed, the harness times them again alternately (tuned first) and records each
    one's timings in ms_alternating (do_bench faked: no GPU, no triton here)."""
    import types

    import measure

    calls = []

    def fake_bench(step, warmup, rep, grad_to_none, return_mode):
        calls.append(step())
        return 1.0 if calls[-1] == "d" else 2.0

    triton = types.ModuleType("triton")
    triton.testing = types.ModuleType("triton.testing")
    triton.testing.do_bench = fake_bench
    monkeypatch.setitem(sys.modules, "triton", triton)
    monkeypatch.setitem(sys.modules, "triton.testing", triton.testing)
    opts = types.SimpleNamespace(warmup=1, rep=1)
    got = measure.alternate({"attnjit": (lambda: "d", None), "attnjit_tuned": (lambda: "t", None)},
                            ["attnjit_tuned", "attnjit"], opts, rounds=2)
    assert calls == ["t", "d", "t", "d"]
    assert got == {"attnjit_tuned": [2.0, 2.0], "attnjit": [1.0, 1.0]}
