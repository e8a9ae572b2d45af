"""The differential test: every case of cases.py, over HTTP and gRPC, sent
to a real Triton 2.51 and to the server (server/); their answers (clients.py:
status code and message) must be equal, except where
expected_differences.toml lists the case with both answers as they are.
A listed difference that no longer occurs, or that now reads otherwise,
fails too, so that the list stays true."""
import json
import os
import time
import tomllib

import pytest

from cases import CASES, ShmObjects
from clients import CLIENTS
from conftest import MARKER

LISTED_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected_differences.toml")
with open(LISTED_PATH, "rb") as f:
    LISTED = tomllib.load(f)
DIFFERENCES = LISTED.get("difference", {})
IGNORED = LISTED.get("extension_fields", {}).get("names", [])

IDS = [f"{protocol}/{name}" for name, (_, protocols) in CASES.items() for protocol in protocols]


def run(case, client, shm):
    try:
        return case(client, shm)
    finally:
        client.unregister_system()
        client.unregister_cuda()
        settle(client)


def settle(client, timeout_s=5.0):
    """Wait until no system region is left, pending ones included. The
    example releases a request's references once it has sent the answer,
    which can be just after the client has read it: an unregister right then
    leaves the name pending until they go, and the next case's register of
    that name would be refused."""
    deadline = time.monotonic() + timeout_s
    while client.status_system() not in ("200 []", "OK") and time.monotonic() < deadline:
        time.sleep(0.005)


def quoted(entry_id, triton, ours):
    """The entry that would list this difference, in the file's TOML."""
    return (f'[difference."{entry_id}"]\nkind = "?"\nreason = "?"\n'
            f"triton = {json.dumps(triton)}\nours = {json.dumps(ours)}")


@pytest.mark.parametrize("case_id", IDS)
def test_same_answer(case_id, triton, ours):
    protocol, name = case_id.split("/")
    case = CASES[name][0]
    shm = ShmObjects(MARKER)
    try:
        theirs = run(case, CLIENTS[protocol](triton, MARKER, IGNORED), shm)
        mine = run(case, CLIENTS[protocol](ours, MARKER, IGNORED), shm)
    finally:
        shm.close()
    if os.environ.get("TRITON_PARITY_ANSWERS"):  # every answer, for a reader
        with open(os.environ["TRITON_PARITY_ANSWERS"], "a") as f:
            f.write(f"{case_id}\n  triton: {theirs}\n  ours:   {mine}\n")
    listed = DIFFERENCES.get(case_id)
    if listed is None:
        assert mine == theirs, ("an answer that differs from Triton's and is not listed in "
                                f"expected_differences.toml:\n{quoted(case_id, theirs, mine)}")
        return
    assert mine != theirs, (f"{case_id} is listed in expected_differences.toml but both servers "
                            f"now answer alike ({mine!r}): remove the entry")
    assert (theirs, mine) == (listed["triton"], listed["ours"]), (
        f"{case_id} still differs, but not as expected_differences.toml says:\n"
        f"{quoted(case_id, theirs, mine)}")


def test_listed_differences_are_cases_with_a_reason():
    for entry_id, entry in DIFFERENCES.items():
        assert entry_id in IDS, f"expected_differences.toml lists {entry_id}, which is no case"
        assert entry.get("kind") in ("deliberate", "to-fix"), f"{entry_id}: kind must be deliberate or to-fix"
        assert entry.get("reason"), f"{entry_id}: no reason given"
        assert {"triton", "ours"} <= set(entry), f"{entry_id}: both answers must be written down"
