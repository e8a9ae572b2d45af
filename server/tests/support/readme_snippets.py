"""The Python blocks of README.md, run as a reader would run them: as
written, but for the addresses (the tests' server takes a free port and a
socket of its own)."""
import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks(section):
    """The Python blocks between README.md's <!-- SECTION:begin --> and
    <!-- SECTION:end --> markers, in order."""
    text = README.read_text()
    part = text[text.index(f"<!-- {section}:begin -->"):text.index(f"<!-- {section}:end -->")]
    return re.findall(r"```python\n(.*?)```", part, re.S)


def run_block(code, addresses):
    """Run code with each written address of addresses (which it must
    contain) replaced by its value; what it printed."""
    for written, actual in addresses.items():
        assert written in code, written
        code = code.replace(written, actual)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(README), "exec"), {})
    return printed.getvalue()


def numbers(text):
    """The integers printed in text, in order."""
    return [int(x) for x in re.findall(r"-?\d+", text)]
