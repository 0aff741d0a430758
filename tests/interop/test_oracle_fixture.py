"""The ExecuTorch oracle runs in its own process, from its own directory, and cannot import etkit."""
from pathlib import Path

import pytest

pytestmark = pytest.mark.oracle

PROBE = Path(__file__).parent / "oracle_scripts" / "import_probe.py"


def test_oracle_process_imports_executorch_from_oracle_dir_and_refuses_etkit(et_oracle):
    from .oracle import oracle_dir

    out = et_oracle(PROBE, "etkit", "etkit.runtime", "executorch.runtime").stdout.splitlines()
    assert out[0].startswith("executorch " + str(oracle_dir()))
    assert out[1].startswith("etkit ImportError: etkit must not be imported")
    assert out[2].startswith("etkit.runtime ImportError:")
    assert out[3] == "executorch.runtime imported"


def test_oracle_script_failure_raises_with_its_output(et_oracle, tmp_path):
    import pytest

    from .oracle import OracleError

    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nprint('about to fail')\nsys.exit(3)\n")
    with pytest.raises(OracleError, match=r"(?s)exit 3.*about to fail"):
        et_oracle(bad)
