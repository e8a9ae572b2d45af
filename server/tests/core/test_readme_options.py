"""server/README.md's table of options is `shmreg-server --help`, row for
row (options_table.py makes it; its docstring says how to write it again)."""
import subprocess

from options_table import README, flags_from_help, readme_table, table_of
from server_process import binary


def test_readme_table_is_the_help():
    assert readme_table(README.read_text()) == table_of(binary()), (
        "server/README.md's options differ from --help: run "
        "python server/tests/support/options_table.py $SERVER_BIN --write server/README.md")


def test_help_parses_into_every_flag():
    rows = flags_from_help(subprocess.run([binary(), "--help"], capture_output=True, text=True,
                                          check=True).stdout)
    spellings = [spelling for spelling, _ in rows]
    assert spellings[0] == "--host ADDR" and spellings[-1] == "-h, --help"
    assert "--allow-client-shm=B" in spellings and "-v, --verbose" in spellings
    assert all(description for _, description in rows), rows
