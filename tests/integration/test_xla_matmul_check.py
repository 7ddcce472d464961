"""bench/xla_matmul_check.py reads OpenXLA's GEMM perf table (a text proto inside a C++ raw
string) into rows; checked on a hand-written sample with its rows worked out by hand, and on
malformed files (one line naming the file and line, exit 2)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import xla_matmul_check as xmc  # noqa: E402

SAMPLE = """// BEGIN_DEFAULT_PERF_TABLE
constexpr char kDefaultMatmulPTable[] = R"pb(
  entries {
    key: "sm_90"  # a comment
    value {
      entries {
        b: 1
        m: 256
        n: 512
        k: 1024
        flops { key: "bf16xbf16->bf16" value: 100000000000000 }
        flops { key: "f8e4m3fnxf8e4m3fn->bf16" value: 250000000000000 }
      }
      entries {
        b: 2
        m: 4096
        n: 4096
        k: 4096
        flops { key: "bf16xbf16->bf16" value: 700000000000000 }
      }
    }
  }
  entries {
    key: "sm_100"
    value {
      entries {
        b: 1
        m: 2048
        n: 2048
        k: 2048
        flops { key: "bf16xbf16->bf16" value: 985762519164562 }
      }
    }
  }
)pb";
"""


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "matmul_interpolator_data.h"
    path.write_text(text)
    return str(path)


def test_sample_rows_by_hand(tmp_path):
    table = xmc.read_table(_write(tmp_path, SAMPLE))
    assert table == {
        "sm_90": [
            (1, 256, 512, 1024, "bf16xbf16->bf16", 1.0e14),
            (1, 256, 512, 1024, "f8e4m3fnxf8e4m3fn->bf16", 2.5e14),
            (2, 4096, 4096, 4096, "bf16xbf16->bf16", 7.0e14),
        ],
        "sm_100": [(1, 2048, 2048, 2048, "bf16xbf16->bf16", 985762519164562.0)],
    }
    # b = 1 rows only, as TFLOP/s by (m, n, k): the batched sm_90 row is not a plain GEMM
    assert xmc._rates(table, "sm_90", xmc.BF16) == {(256, 512, 1024): 100.0}
    # 2 x 2048^3 / 985.76... TFLOP/s = 17,428 ns: the table's rates are integer-ns times
    rate = xmc._rates(table, "sm_100", xmc.BF16)[(2048, 2048, 2048)] * 1e12
    assert 2 * 2048**3 * 1e9 / rate == pytest.approx(17428, abs=0.01)


def test_error_names_the_file_line(tmp_path):
    bad = SAMPLE.replace("k: 1024", "k: -3")  # line 10 of the sample (the raw string opens on 2)
    with pytest.raises(xmc.TableError, match=r"matmul_interpolator_data.h:10: k must be a posi"):
        xmc.read_table(_write(tmp_path, bad))
    bad = SAMPLE.replace('value: 250000000000000', 'value: "x"')
    with pytest.raises(xmc.TableError, match=r"\.h:12: flops needs a key and a numeric value"):
        xmc.read_table(_write(tmp_path, bad))


def test_bare_text_proto_is_read(tmp_path):
    body = SAMPLE.split('R"pb(')[1].split(')pb"')[0]
    assert xmc.read_table(_write(tmp_path, body)) == xmc.read_table(_write(tmp_path, SAMPLE))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("int x = 1;\n", "no GEMM perf table"),
        ('R"pb( entries { key: "sm_90" value { entries { b: 1 m: 2 )pb"', "never closed"),
        ('R"pb( entries { key: "sm_90" value { entries { b: 1 m: 2 n: 2 } } } )pb"',
         "lacks k"),
        ('R"pb( entries { key: "sm_90" value { entries { b: 1 m: 0 n: 2 k: 2 } } } )pb"',
         "m must be a positive integer"),
        ('R"pb( entries { key: "sm_90" value { entries { b: 1 m: 2 n: 2 k: 2\n'
         '  flops { key: "bf16xbf16->bf16" value: "x" } } } } )pb"', ":2: flops needs"),
        ('R"pb( entries { value { } } )pb"', "needs a key and a value"),
        ('R"pb( entries { key: "sm_90" value { } } )pb"', "no GEMM entries"),
        ('R"pb( entries { key: "sm_90" value { ; } } )pb"', "unexpected text"),
        ('R"pb( entries { key: "sm_90" value { entries { b: } } } )pb"', "b has no value"),
        ('R"pb( entries { key: "sm_90" } }\n entries { key: "sm_100" } )pb"',
         ":1: a closing brace without its block"),
        ('R"pb( entries { 12 "sm_90" } )pb"', "expected a field name, got '12'"),
    ],
)
def test_malformed_one_line(tmp_path, text, message):
    with pytest.raises(xmc.TableError) as err:
        xmc.read_table(_write(tmp_path, text))
    assert message in str(err.value) and "\n" not in str(err.value)
    assert str(err.value).startswith(str(tmp_path / "matmul_interpolator_data.h"))


def test_main_exit_2_on_malformed(tmp_path, capsys):
    assert xmc.main([_write(tmp_path, "nothing here\n")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "no GEMM perf table" in err and "\n" not in err
    assert xmc.main([str(tmp_path / "missing.h")]) == 2
    assert "cannot read" in capsys.readouterr().err
