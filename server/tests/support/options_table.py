"""server/README.md's table of options, made from `shmreg-server --help`.

The README's table (between <!-- options:begin --> and <!-- options:end -->)
is this module's output for the built server, so that the two cannot drift:
test_readme_options.py fails when they differ, and

    python server/tests/support/options_table.py BUILD/shmreg-server --write server/README.md

writes the table again after a flag changes (options.c's table of flags).
"""
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"
COLUMN = 30  # where --help's descriptions start


def flags_from_help(text):
    """[(spelling, description)] from --help's text: "--port N" and its
    description, whose lines are joined with spaces."""
    rows = []
    for line in text.splitlines()[1:]:  # after "usage: ..."
        if line.startswith(" " * COLUMN):
            spelling, description = rows[-1]
            rows[-1] = (spelling, f"{description} {line.strip()}".strip())
        elif len(line) > COLUMN and line[COLUMN - 2:COLUMN] == "  " and line[COLUMN] != " ":
            rows.append((line[:COLUMN].strip(), line[COLUMN:].strip()))
        else:
            rows.append((line.strip(), ""))
    return rows


def cell(text):
    """A table cell: '|' escaped (also inside code spans, as GitHub's tables want)."""
    return text.replace("|", r"\|")


def markdown(rows):
    lines = ["| Option | What it sets |", "| --- | --- |"]
    lines += [f"| {cell('`' + spelling + '`')} | {cell(description)} |" for spelling, description in rows]
    return "\n".join(lines) + "\n"


def table_of(binary):
    help_text = subprocess.run([binary, "--help"], check=True, capture_output=True, text=True).stdout
    return markdown(flags_from_help(help_text))


def readme_table(text):
    return text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip("\n") + "\n"


def main():
    binary = sys.argv[1]
    table = table_of(binary)
    if sys.argv[2:4] == ["--write"] or sys.argv[2:3] == ["--write"]:
        path = Path(sys.argv[3]) if len(sys.argv) > 3 else README
        text = path.read_text()
        head, tail = text[:text.index(BEGIN) + len(BEGIN)], text[text.index(END):]
        path.write_text(f"{head}\n{table}{tail}")
    else:
        sys.stdout.write(table)


if __name__ == "__main__":
    main()
