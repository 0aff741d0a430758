"""etkit inspect's text: every fact on its own line; bad files give one line, no traceback."""

from __future__ import annotations

import io

from etkit.serialize import serialize_pte
from etkit.serialize.inspect import format_program, run_inspect
from .sample_programs import make_contents


def test_dump_lists_header_segments_methods_and_instructions(tmp_path):
    path = tmp_path / "model.pte"
    path.write_bytes(serialize_pte(make_contents(), segment_alignment=4096))
    text = format_program(path)
    lines = text.splitlines()
    assert lines[0] == f"{path}: .pte program, {path.stat().st_size} bytes"
    assert "  file identifier ET12, Program.version 0" in lines
    assert any(l.startswith("  extended header eh00: length 32, program_size ") and
               "segment_base_offset 4096" in l for l in lines)
    assert "    [0] offset 0 (file byte 4096), size 39: constants (3 offsets)" in lines
    assert "    [1] offset 4096 (file byte 8192), size 130: delegate TestBackend#0 of 'forward'" in lines
    assert "    'weights': segment 3, 768 bytes" in lines
    assert "method 'forward':" in lines and "method 'other':" in lines
    assert "    0: KernelCall aten::add.out(args=[0,1,2,3])" in lines
    assert "    1: DelegateCall TestBackend#0 (args=[3,5])" in lines
    assert "    2: MoveCall 5 -> 3" in lines
    assert "    4: FreeCall 3" in lines
    assert "    0: TestBackend, 130 bytes in segment 1, compile specs: threads=04 (1 bytes)" in lines
    assert "    1: Tensor float32[2, 3] constant #1" in lines
    assert "    3: Tensor float32[2, 3] planned(mem 1 @ 0)" in lines
    assert "    10: OptionalTensorList [0, -1]" in lines


def test_dump_accepts_bytes():
    assert format_program(serialize_pte(make_contents())).startswith("<bytes>: .pte program")


def test_inspect_of_a_non_pte_prints_one_line_and_fails(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not a program\n")
    out, err = io.StringIO(), io.StringIO()
    assert run_inspect(str(path), out, err) == 1
    assert out.getvalue() == ""
    assert err.getvalue() == (f"etkit inspect: {path}: not a .pte program: bytes 4..8 are "
                              "b'o, t', expected the file identifier b'ET12'\n")


def test_inspect_of_a_truncated_pte_names_the_field(tmp_path):
    path = tmp_path / "cut.pte"
    path.write_bytes(serialize_pte(make_contents())[:5000])
    err = io.StringIO()
    assert run_inspect(str(path), io.StringIO(), err) == 1
    assert "segment data ends at" in err.getvalue() and "file truncated?" in err.getvalue()
    assert "Traceback" not in err.getvalue()


def test_inspect_of_a_missing_file_fails_cleanly(tmp_path):
    err = io.StringIO()
    assert run_inspect(str(tmp_path / "absent.pte"), io.StringIO(), err) == 1
    assert err.getvalue().startswith("etkit inspect: cannot read")
