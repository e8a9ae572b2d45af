"""A flag the server cannot take is refused on one line of stderr that
names it and points at --help: the whole help, some hundred lines, would
scroll the reason off the terminal. --help itself still prints every flag."""
import subprocess

import pytest

from server_process import binary


def refused(*args):
    """Start the server with args; it must exit 2 at once: its stderr."""
    proc = subprocess.run([binary(), "--port", "0", *args], capture_output=True, text=True,
                          timeout=20)
    assert proc.returncode == 2 and proc.stdout == "", (args, proc.returncode, proc.stdout)
    return proc.stderr


@pytest.mark.parametrize("args, names", [
    (["--no-such-flag"], "unknown option '--no-such-flag'"),
    (["-x"], "unknown option '-x'"),
    (["--threads"], "--threads wants an argument"),
    (["--verbose=yes"], "--verbose takes no argument"),
    (["--max-b", "3"], "'--max-b' is the start of more than one option"),
    (["stray"], "unexpected argument 'stray'"),
])
def test_wrong_flag_is_one_line_naming_it(args, names):
    stderr = refused(*args)
    assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
    assert names in stderr and stderr.rstrip().endswith("see --help"), stderr
    assert "usage:" not in stderr, stderr


def test_help_still_prints_every_flag_to_stdout():
    proc = subprocess.run([binary(), "--help"], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith("usage: ") and "--request-timeout-s N" in proc.stdout
    assert len(proc.stdout.splitlines()) > 50, proc.stdout
