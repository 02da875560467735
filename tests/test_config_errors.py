"""A configuration that cannot mean what it says is an error, never a silent default
(issue 19, item 8); every valid TOML spelling of the table is read."""

from __future__ import annotations

import pytest

from devlint import cli
from devlint.config import ConfigError, ConfigResolver, discover_config
from tests.test_cli import write

SNIPPET = "import torch\nx = torch.zeros(3).cuda()\n"


def _check(tmp_path, capsys, *args: str) -> tuple[int, str]:
    code = cli.main(["--no-cache", "--jobs", "1", *args, str(tmp_path / "train.py")])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


@pytest.mark.parametrize(
    "table",
    [
        'select = ["DEV999"]',
        'ignore = ["DEV1", "DEV199"]',
        'extend-select = ["DEV9"]',
        'per-file-ignores = { "tests/*" = ["DEV999"] }',
    ],
)
def test_an_unknown_rule_code_is_an_error(tmp_path, capsys, table):
    write(tmp_path, "pyproject.toml", f"[tool.devlint]\n{table}\n")
    write(tmp_path, "train.py", SNIPPET)
    code, err = _check(tmp_path, capsys)
    assert code == 2 and "names no devlint rule" in err


@pytest.mark.parametrize("option", ["--select", "--ignore", "--extend-select"])
def test_an_unknown_rule_code_on_the_command_line_is_an_error(tmp_path, capsys, option):
    write(tmp_path, "train.py", SNIPPET)
    code, err = _check(tmp_path, capsys, option, "DEV1,DEV999")
    assert code == 2 and f"{option}: 'DEV999' names no devlint rule" in err


def test_known_codes_and_groups_are_accepted(tmp_path, capsys):
    write(tmp_path, "pyproject.toml", '[tool.devlint]\nselect = ["DEV0", "DEV1"]\nignore = ["DEV102", "dev106"]\n')
    write(tmp_path, "train.py", SNIPPET + "y = x.to('cuda')\n")
    assert _check(tmp_path, capsys)[0] == 1


def test_a_pyproject_that_is_not_utf8_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_bytes(b'[tool.devlint]\n# caf\xe9\nselect = ["DEV1"]\n')
    write(tmp_path, "train.py", SNIPPET)
    code, err = _check(tmp_path, capsys)
    assert code == 2 and "pyproject.toml: not valid TOML: not UTF-8" in err


def test_a_broken_pyproject_that_is_not_devlint_s_is_not_an_error(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_bytes(b"[project\nname = 'x'\n")
    write(tmp_path, "train.py", SNIPPET)
    assert _check(tmp_path, capsys)[0] == 1


@pytest.mark.parametrize("name", ["class", "None", "not-a-name", "1device", ""])
def test_device_name_must_be_an_identifier_and_not_a_keyword(tmp_path, capsys, name):
    write(tmp_path, "pyproject.toml", f'[tool.devlint]\ndevice-name = "{name}"\n')
    write(tmp_path, "train.py", SNIPPET)
    code, err = _check(tmp_path, capsys)
    assert code == 2 and "device-name: expected a Python identifier that is not a keyword" in err


def test_torch_version_as_a_toml_float_is_rejected(tmp_path, capsys):
    write(tmp_path, "pyproject.toml", "[tool.devlint]\ntorch-version = 2.10\n")
    write(tmp_path, "train.py", SNIPPET)
    code, err = _check(tmp_path, capsys)
    assert code == 2 and 'write the version as a string, torch-version = "2.1"' in err and "2.10 reads as 2.1" in err
    write(tmp_path, "pyproject.toml", '[tool.devlint]\ntorch-version = "2.10"\n')
    assert discover_config(str(tmp_path)).torch_version == (2, 10)


@pytest.mark.parametrize(
    "toml",
    [
        '[tool.devlint]\nignore = ["DEV102"]\n',
        '[tool]\ndevlint = { ignore = ["DEV102"] }\n',
        'tool.devlint.ignore = ["DEV102"]\n',
        '[tool]\ndevlint.ignore = ["DEV102"]\n',
        '[project]\nname = "x"\n\n[tool . devlint]\nignore = ["DEV102"]\n',
        '[tool.devlint.per-file-ignores]\n"*.py" = ["DEV102"]\n',
        "[ tool.'devlint' ]\nignore = ['DEV102']\n",
    ],
)
def test_every_toml_spelling_of_the_table_is_found(tmp_path, capsys, toml):
    write(tmp_path, "sub/pyproject.toml", toml)
    write(tmp_path, "pyproject.toml", '[tool.devlint]\nselect = ["DEV1"]\n')  # a farther one, not used
    write(tmp_path, "sub/train.py", SNIPPET)
    assert cli.main(["--no-cache", "--jobs", "1", str(tmp_path / "sub" / "train.py")]) == 0
    assert "All checks passed!" in capsys.readouterr().out


def test_the_resolver_applies_command_line_overrides_and_rejects_unknown_codes(tmp_path):
    assert ConfigResolver(ignore=["DEV102"]).for_directory(str(tmp_path)).ignore == ("DEV102",)
    with pytest.raises(ConfigError, match="names no devlint rule"):
        ConfigResolver(select=["DEV999"]).for_directory(str(tmp_path))
