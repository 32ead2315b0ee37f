"""kiln.tune: the report as rows. On the CPU interpreter (run="cpu"): every config of a declared
space runs and agrees with config 0; a config that computes something else is a row that says so
(check=True raises); run=None compiles and prunes only; a bad space is a CompileError at its
place. With a GPU (cuda_only): the kept configs are timed and the fastest wins."""
import pytest

import kiln
from conftest import HAS_CUDA, cuda_only

SRC = """
kernel axpy(X: *f32, Z: *f32, n: i32, const BLOCK: i32 = 128, const BAD: i32 = 0)
{
    let offs = program_id(0) * BLOCK + arange(BLOCK);
    let m = offs < n;
    store(Z + offs, load(X + offs, mask = m) * 2.0 + (BLOCK == BAD ? 0.25 : 0.0), mask = m);
}
tune axpy {
    BLOCK in [64, 128, 256];
    num_warps in [1, 2, 4];
    require BLOCK >= 32 * num_warps;
    key n;
}
"""
ARGS = {"X": "rand:700", "Z": "out:700", "n": 700}


def test_rows_on_the_interpreter():
    rows = kiln.tune("axpy.tile", "axpy", source=SRC, args=ARGS, grid=("700/BLOCK",), run="cpu", jobs=2)
    assert isinstance(rows, kiln.TuneRows)
    assert len(rows) == 8 and rows.nspace == 8 and rows.ntotal == 9   # (64, 4 warps) removed
    assert [(r["BLOCK"], r["num_warps"]) for r in rows[:3]] == [("64", "1"), ("64", "2"), ("128", "1")]
    for r in rows:
        assert r["status"] == "ok", r
        assert r["max_err"] == 0.0 and r["time_ms"] is None and r["compile_ms"] > 0
    assert rows.winner is None and rows.key == "n=1024"
    assert rows.csv.startswith("BLOCK,num_warps,time_ms,") and len(rows.csv.splitlines()) == 9
    assert rows.svg.startswith("<svg ") and "8 configs" in rows.table


def test_a_wrong_config_is_a_row():
    rows = kiln.tune("axpy.tile", "axpy", source=SRC, defines={"BAD": 128}, args=ARGS, grid=("700/BLOCK",),
                     run="cpu")
    bad = [r for r in rows if r["status"] != "ok"]
    assert bad and all(r["BLOCK"] == "128" for r in bad)
    assert all(r["status"].startswith("wrong result: differs from config 0 by 0.25") for r in bad)
    with pytest.raises(kiln.KilnError, match="differ from config 0"):
        kiln.tune("axpy.tile", "axpy", source=SRC, defines={"BAD": 128}, args=ARGS, grid=("700/BLOCK",),
                  run="cpu", check=True)


def test_compile_only_and_limits():
    rows = kiln.tune("axpy.tile", "axpy", source=SRC, run=None, max_configs=3)
    assert len(rows) == 3 and rows.nspace == 8
    assert all(r["max_err"] is None and r["status"] == "ok" for r in rows)


def test_bad_space_is_located():
    src = SRC.replace("key n;", "key m;")
    with pytest.raises(kiln.CompileError, match=r"axpy.tile:12:9: error: 'm' is no parameter of kernel 'axpy'"):
        kiln.tune("axpy.tile", "axpy", source=src, run=None)


@cuda_only
def test_timed_on_the_gpu():
    rows = kiln.tune("axpy.tile", "axpy", source=SRC, args={"X": "rand:1048576", "Z": "out:1048576",
                     "n": 1048576}, grid=("1048576/BLOCK",), run="gpu", bytes=8 * 1048576, repeats=5)
    assert HAS_CUDA and rows.winner is not None
    assert rows[rows.winner]["status"] == "winner"
    assert all(r["time_ms"] > 0 and r["gbps"] > 0 for r in rows if r["status"] in ("ok", "winner"))
