"""The built-in scenarios (fedgc.scenario.builtin): the package carries the repository's scenarios/
files (fedgc/scenarios), a bare name that is no file in the current folder runs the built-in of that
name, ``fedgc scenarios`` lists them with their one-line descriptions, and ``fedgc scenarios copy``
writes one out to edit, never over an existing file nor through a link. tests/test_install.py does the
same from a wheel installed into a fresh virtual environment."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from fedgc.invocation import as_invoked
from fedgc.scenario import builtin as builtin_scenarios
from fedgc.scenario.model import ScenarioError, load_scenario, load_tree
from tests.conftest import REPO

SHIPPED = sorted(p.stem for p in (REPO / "scenarios").glob("*.yaml"))


def test_the_package_carries_every_scenario_of_the_repository():
    assert len(SHIPPED) >= 6 and builtin_scenarios.names() == SHIPPED
    for name in SHIPPED:
        assert builtin_scenarios.built_in(name).read_bytes() == (REPO / "scenarios" / f"{name}.yaml").read_bytes()


@pytest.mark.parametrize("name", SHIPPED)
def test_each_built_in_opens_with_a_one_line_description_that_names_its_download(name):
    """The first line is the description ``fedgc scenarios`` shows; a scenario that reads fetched data
    (``${FEDGC_DATA_DIR}``, ``${FEDGC_TRACE_DIR}``) says which ``fedgc fetch`` gets it."""
    text = builtin_scenarios.built_in(name).read_text()
    line = builtin_scenarios.description(name)
    assert text.startswith(f"# {line}\n") and line.endswith(".") and 20 <= len(line) <= 130
    assert ("needs `fedgc fetch " in line) == ("${FEDGC_" in text)


def test_fedgc_scenarios_lists_each_with_its_description(capsys):
    assert builtin_scenarios.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("built-in scenarios")
    assert [row.split()[0] for row in out[1:]] == SHIPPED
    for row, name in zip(out[1:], SHIPPED):
        assert row.endswith(builtin_scenarios.description(name))


def test_a_bare_name_is_the_built_in_unless_a_file_here_has_that_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for text in ("quickstart", "quickstart.yaml"):
        assert load_scenario(text).model_dump() == load_scenario(REPO / "scenarios" / "quickstart.yaml").model_dump()
    (tmp_path / "quickstart").write_text("name: mine\nrounds: 3\ndata: {dataset: digits}\n")
    assert load_scenario("quickstart").name == "mine"  # the file in the current folder wins
    os.symlink(tmp_path / "nowhere.yaml", tmp_path / "quickstart.yaml")  # so does anything there, a dangling link too
    with pytest.raises(ScenarioError, match=r"^quickstart\.yaml: no such scenario file$"):
        load_tree("quickstart.yaml")


def test_an_unknown_name_is_one_line_naming_the_built_ins_and_a_path_is_never_a_built_in(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioError) as err:
        load_tree("quickstrat")
    assert str(err.value) == (f"quickstrat: no such scenario file and no built-in scenario of that name "
                              f"(built-in: {', '.join(SHIPPED)})")
    for path in ("sub/quickstart.yaml", "./sub/quickstart", str(tmp_path / "quickstart.yaml"), "../quickstart"):
        with pytest.raises(ScenarioError, match=r": no such scenario file$"):
            load_tree(path)


def test_copy_writes_the_built_in_to_edit(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shipped = (REPO / "scenarios" / "quickstart.yaml").read_bytes()
    assert builtin_scenarios.main(["copy", "quickstart"]) == 0
    assert (tmp_path / "quickstart.yaml").read_bytes() == shipped
    assert capsys.readouterr().out == f"wrote quickstart.yaml (edit it, then: {as_invoked('run')} quickstart.yaml)\n"
    (tmp_path / "mine").mkdir()
    assert builtin_scenarios.main(["copy", "quickstart", "mine"]) == 0  # a folder: into it, as NAME.yaml
    assert builtin_scenarios.main(["copy", "jvm_phones.yaml", "mine/phones.yaml"]) == 0
    assert (tmp_path / "mine" / "quickstart.yaml").read_bytes() == shipped
    assert (tmp_path / "mine" / "phones.yaml").read_bytes() == (REPO / "scenarios" / "jvm_phones.yaml").read_bytes()


def test_copy_never_overwrites_nor_writes_through_a_link(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kept.yaml").write_text("mine\n")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "kept.yaml", tmp_path / "link.yaml")
    os.symlink(tmp_path / "elsewhere" / "new.yaml", tmp_path / "dangling.yaml")
    os.symlink(tmp_path / "elsewhere", tmp_path / "dirlink")
    cases = {
        ("quickstart", "kept.yaml"): "kept.yaml: already exists; fedgc scenarios copy never overwrites it",
        ("quickstart", "link.yaml"): "link.yaml: is a link; fedgc does not write through links",
        ("quickstart", "dangling.yaml"): "dangling.yaml: is a link; fedgc does not write through links",
        ("quickstart", "dirlink"): "dirlink: is a link; fedgc does not write through links",
        ("quickstart", "dirlink/"): "dirlink: is a link; fedgc does not write through links",
        ("quickstart", "missing/q.yaml"): "missing/q.yaml: no such folder to write into (missing)",
        ("nosuch", None): "'nosuch' is not a built-in scenario (built-in: ",
        ("../scenarios/quickstart", None): "'../scenarios/quickstart' is not a built-in scenario",
    }
    for (name, dest), message in cases.items():
        assert builtin_scenarios.main(["copy", name, *([dest] if dest else [])]) == 2, (name, dest)
        err = capsys.readouterr().err
        assert err.startswith(f"error: {message}") and err.count("\n") == 1, err
    assert (tmp_path / "kept.yaml").read_text() == "mine\n"
    assert list((tmp_path / "elsewhere").iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.yaml", "dirlink", "elsewhere", "kept.yaml",
                                                          "link.yaml"]


@pytest.mark.slow
def test_the_command_runs_a_built_in_by_name_from_an_empty_folder(tmp_path):
    """``fedgc run quickstart`` and ``fedgc check quickstart`` from a folder holding nothing."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    check = subprocess.run([sys.executable, "-m", "fedgc", "check", "quickstart", "--set", "rounds=1"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300, check=False, env=env)
    assert check.returncode == 0 and check.stdout.startswith("ok: "), check.stderr
    run = subprocess.run([sys.executable, "-m", "fedgc", "run", "quickstart", "--set", "rounds=1", "--set",
                          "data.num_clients=4", "--out", "r", "--quiet"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, check=False, env=env)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "r" / "summary.json").is_file()
    assert "name: quickstart" in (tmp_path / "r" / "scenario.yaml").read_text()
