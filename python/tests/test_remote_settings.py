"""shmreg.remote.connect's transport settings: a setting the library refuses
raises RemoteError with the library's message before the server is asked
for an invitation (the URL here answers nothing), and before UCX is
loaded, so these run in any build of the library, with UCX or without."""

import pytest

from shmreg import remote

NOBODY = "127.0.0.1:1"  # no server: reaching it would raise URLError instead


def _library_checks_settings():
    lib = remote._library()
    if not hasattr(lib, "shmreg_remote_client_create_with"):
        pytest.skip("this libshmreg predates shmreg_remote_client_create_with")


@pytest.mark.parametrize(
    "settings, part",
    [
        ({"tcp_ports": "40000-40010"}, "given without a tcp_device"),
        ({"tcp_device": "no-such-dev0"}, "no network interface of that name"),
        ({"tcp_device": "lo,eth0"}, "not a network interface's name"),
        ({"tcp_device": "lo", "tcp_ports": "2000-1000"}, "not LOW-HIGH"),
    ],
)
def test_refused_settings_raise_before_any_request(settings, part):
    _library_checks_settings()
    with pytest.raises(remote.RemoteError) as raised:
        remote.connect(NOBODY, **settings)
    assert raised.value.code == "SHMREG_ERR_INVALID_ARG"
    assert part in raised.value.message
    assert "shmreg_remote_client_config" in raised.value.message


def test_settings_are_keyword_only():
    with pytest.raises(TypeError):
        remote.connect(NOBODY, None, None, "lo")
