"""A strict reader of the Prometheus text exposition format (0.0.4), as
much of it as the server's /metrics writes: `# HELP`, `# TYPE`, and
samples `name{label="value",...} number`. Strict where a lenient reader
would hide a mistake: a sample must follow its family's HELP and TYPE, a
family appears once, and a name must be a Prometheus metric name."""
import re

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(rf"^({NAME})(?:\{{(.*)\}})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\.)*)"(?:,|$)')
TYPES = ("counter", "gauge", "untyped", "summary", "histogram")


class Metrics:
    """help[name], type[name], and samples[(name, labels)] = float, where
    labels is a tuple of (label, value) pairs, sorted."""

    def __init__(self):
        self.help, self.type, self.samples = {}, {}, {}

    def value(self, name, **labels):
        """The sample of name with exactly these labels (KeyError if none)."""
        return self.samples[(name, tuple(sorted(labels.items())))]


def parse_labels(text, line):
    labels, pos = [], 0
    while pos < len(text):
        match = LABEL.match(text, pos)
        if not match:
            raise ValueError(f"malformed labels in {line!r}")
        labels.append((match.group(1), match.group(2)))
        pos = match.end()
    return tuple(sorted(labels))


def parse_comment(line, metrics):
    parts = line.split(" ", 3)
    if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
        return  # a plain comment
    _, kind, name = parts[:3]
    rest = parts[3] if len(parts) == 4 else ""
    if not re.fullmatch(NAME, name):
        raise ValueError(f"bad metric name in {line!r}")
    table = metrics.help if kind == "HELP" else metrics.type
    if name in table:
        raise ValueError(f"second {kind} for {name}")
    if kind == "TYPE" and rest not in TYPES:
        raise ValueError(f"unknown type in {line!r}")
    if kind == "TYPE" and any(sample[0] == name for sample in metrics.samples):
        raise ValueError(f"TYPE of {name} after its samples")
    table[name] = rest


def parse(text):
    """Metrics of text; ValueError on anything malformed."""
    if text and not text.endswith("\n"):
        raise ValueError("the text does not end in a newline")
    metrics = Metrics()
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("#"):
            parse_comment(line, metrics)
            continue
        match = SAMPLE.match(line)
        if not match:
            raise ValueError(f"malformed sample {line!r}")
        name, labels, value = match.group(1), match.group(2), match.group(3)
        if name not in metrics.help or name not in metrics.type:
            raise ValueError(f"sample of {name} before its HELP and TYPE")
        key = (name, parse_labels(labels or "", line))
        if key in metrics.samples:
            raise ValueError(f"duplicate sample {line!r}")
        metrics.samples[key] = float(value)
    return metrics


def scrape(server):
    """GET /metrics of a server (server_process.Server): (Content-Type, Metrics)."""
    status, headers, body = server.request("GET", "/metrics")
    if status != 200:
        raise AssertionError(f"/metrics answered {status}: {body[:200]!r}")
    return headers.get("Content-Type"), parse(body.decode())
