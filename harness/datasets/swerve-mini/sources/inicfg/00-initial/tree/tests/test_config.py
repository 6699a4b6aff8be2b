import pytest

from inicfg import Config, MissingOptionError

TEXT = """
retries = 3
[server]
host = example.org
port = 8080
debug = true
[client]
debug = false
"""


@pytest.fixture
def cfg():
    return Config.from_string(TEXT)


def test_sections_exclude_default(cfg):
    assert cfg.sections() == ["server", "client"]


def test_get_from_section(cfg):
    assert cfg.get("server", "host") == "example.org"


def test_get_is_case_insensitive_for_keys(cfg):
    assert cfg.get("server", "HOST") == "example.org"


def test_get_falls_back_to_default(cfg):
    assert cfg.get("client", "retries") == "3"


def test_get_missing_raises(cfg):
    with pytest.raises(MissingOptionError):
        cfg.get("client", "host")


def test_get_missing_with_default(cfg):
    assert cfg.get("client", "host", "localhost") == "localhost"


def test_getint(cfg):
    assert cfg.getint("server", "port") == 8080


def test_getbool(cfg):
    assert cfg.getbool("server", "debug") is True
    assert cfg.getbool("client", "debug") is False


def test_has_option(cfg):
    assert cfg.has_option("server", "port")
    assert not cfg.has_option("client", "port")


def test_from_file(tmp_path):
    path = tmp_path / "app.ini"
    path.write_text("[db]\nname = prod\n", encoding="utf-8")
    assert Config.from_file(path).get("db", "name") == "prod"
