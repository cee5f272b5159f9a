"""The `curator` command: `--version`, `check` output and exit codes, `serve` config resolution."""

from __future__ import annotations

import logging
import subprocess
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest

from proxy.cli import main as cli
from proxy.cli.main import main
from proxy.config.loader import DEFAULT_UPSTREAM, Config

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "config.example.yaml"

BROKEN = """\
upstreams:
  openai: {base_url: "https://api.openai.com/v1", read_timeout_s: 0}
policies:
  agents:
    curators:
      - tool_result_truncation: {max_tokens: -5}
routes:
  - {name: default, upstream: opena, policy: agents}
"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "CURATOR_UPSTREAM", "CURATOR_PORT", "VLLM_URL"):
        monkeypatch.delenv(name, raising=False)


def test_version_is_pyproject_version(capsys: pytest.CaptureFixture[str]) -> None:
    """From the installed metadata, which `make` reinstalls whenever pyproject.toml changes."""
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"curator {expected}\n"


def test_version_of_a_source_tree_never_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise cli.PackageNotFoundError(name)

    monkeypatch.setattr(cli, "version", missing)
    assert cli.package_version() == "unknown (not installed)"


def test_check_prints_routes_and_chains(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--config", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"config: {EXAMPLE}: OK\n")
    assert "  1. agents\n" in out
    assert "     match: path=/v1/chat/completions model=gpt-4o* header x-team=agents\n" in out
    assert "     upstream: openai https://api.openai.com/v1 (client's Authorization passed" in out
    assert "     policy: agents (x-curator-policy header allowed)\n" in out
    assert "  3. default\n     match: everything\n" in out
    assert "      - turn_window: {max_turns: 50}\n" in out
    assert "      - system_preservation: {roles: [system, developer], pin_first_user: true}" in out
    assert "  llama-3.1-70b*: context_window 131072, max_input_tokens 120000, cl100k_base" in out
    assert "    curators: none (requests pass through unchanged)" in out


def test_check_never_prints_api_keys(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-123")
    assert main(["check", "--config", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "sk-very-secret" not in out
    assert "upstream: openai https://api.openai.com/v1 (api_key set)" in out


def test_check_reports_every_problem_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(BROKEN)
    assert main(["check", "--config", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        f"{path}:2: upstreams.openai.read_timeout_s: expected a number > 0, got an integer 0",
        f"{path}:6: policies.agents.curators[0].tool_result_truncation.max_tokens: "
        "must be > 0, got -5",
        f"{path}:8: routes[0].upstream: unknown upstream 'opena'; did you mean 'openai'? "
        "(defined: openai)",
        "3 problems found.",
    ]


def test_check_with_a_missing_config_file_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "--config", str(tmp_path / "absent.yaml")]) == 1
    assert capsys.readouterr().err.splitlines()[0] == (
        f"{tmp_path}/absent.yaml: cannot read: No such file or directory"
    )


def test_check_without_config_file_shows_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("config: <defaults>: OK\nserver: 127.0.0.1:8080")
    assert f"upstream: default {DEFAULT_UPSTREAM} (client's Authorization passed through)" in out
    assert "      - turn_masking: {keep_turns: 15, trigger_tokens: 16000," in out


def test_check_reads_config_yaml_in_the_working_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "config.yaml").write_text(BROKEN)
    monkeypatch.chdir(tmp_path)
    assert main(["check"]) == 1
    assert capsys.readouterr().err.startswith("config.yaml:2: upstreams.openai.read_timeout_s")


class FakeServer:
    """Stands in for proxy.serving.server, recording what `serve` was given."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[Config, dict[str, Any]]] = []
        module = types.ModuleType("proxy.serving.server")
        module.serve = self.serve  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "proxy.serving.server", module)

    def serve(self, config: Config, **options: Any) -> None:
        self.calls.append((config, options))


def test_serve_passes_config_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeServer(monkeypatch)
    argv = ["serve", "--config", str(EXAMPLE), "--host", "0.0.0.0", "--port", "9000"]
    assert main([*argv, "--workers", "3"]) == 0
    ((config, options),) = server.calls
    assert [r.name for r in config.routes] == ["agents", "local", "default"]
    assert options == {
        "host": "0.0.0.0",
        "port": 9000,
        "workers": 3,
        "config_path": str(EXAMPLE),
    }


def test_serve_without_config_file_uses_defaults_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CURATOR_UPSTREAM", "http://127.0.0.1:11434/v1")
    with caplog.at_level(logging.INFO, logger="curator.cli"):
        assert main(["serve"]) == 0
    ((config, options),) = server.calls
    assert config.source == "<defaults>"
    assert config.upstreams["default"].base_url == "http://127.0.0.1:11434/v1"
    assert options == {"host": None, "port": None, "workers": None, "config_path": None}
    expected = "no ./config.yaml found: using built-in defaults (upstream http://127.0.0.1:11434/v1"
    assert expected in caplog.text


def test_serve_with_a_missing_config_file_does_not_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = FakeServer(monkeypatch)
    assert main(["serve", "--config", str(tmp_path / "absent.yaml")]) == 1
    assert server.calls == []
    assert "absent.yaml: cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["serve", "check"])
def test_a_misspelt_tokenizer_choice_is_refused_before_starting(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    server = FakeServer(monkeypatch)
    monkeypatch.setenv("CURATOR_TOKENIZER", "tiktokn")
    assert main([command, "--config", str(EXAMPLE)]) == 1
    assert server.calls == []
    err = capsys.readouterr().err
    assert "CURATOR_TOKENIZER='tiktokn': must be one of auto, tiktoken" in err


KEYED_PUBLIC = """\
server: {host: 0.0.0.0}
upstreams:
  openai: {base_url: "https://api.openai.com/v1", api_key: "${OPENAI_API_KEY}"}
policies:
  off: preset:passthrough
routes:
  - {name: default, upstream: openai, policy: "off"}
"""


@pytest.mark.parametrize("command", ["serve", "check"])
@pytest.mark.parametrize(
    ("host_args", "refused"),
    [([], True), (["--host", "127.0.0.1"], False), (["--host", "::"], True)],
)
def test_check_refuses_what_serve_refuses_to_bind(
    command: str,
    host_args: list[str],
    refused: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A public bind with an upstream key and no proxy keys: `check` says so, as `serve` does."""
    server = FakeServer(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-bind-check-0123456789")
    path = tmp_path / "config.yaml"
    path.write_text(KEYED_PUBLIC)
    status = main([command, "--config", str(path), *host_args])
    captured = capsys.readouterr()
    if refused:
        assert status == 1
        assert captured.err.startswith(f"{path}: refusing to listen on ")
        assert captured.out == ""
        assert server.calls == []
    else:
        assert status == 0, captured.err
    assert "sk-bind-check" not in captured.out + captured.err


@pytest.mark.parametrize(
    "argv",
    [[], ["serve", "--port", "0"], ["serve", "--port", "http"], ["serve", "--workers", "0"], ["x"]],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: curator" in capsys.readouterr().err


def run_installed(*args: str) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).parent / "curator"
    return subprocess.run(
        [str(script), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "TIKTOKEN_CACHE_DIR": "/nonexistent"},
        check=False,
    )


def test_installed_entry_point_runs_check(tmp_path: Path) -> None:
    ok = run_installed("check", "--config", "config.example.yaml")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("config: config.example.yaml: OK\n")
    broken = tmp_path / "config.yaml"
    broken.write_text(BROKEN)
    failed = run_installed("check", "--config", str(broken))
    assert failed.returncode == 1
    assert failed.stderr.splitlines()[-1] == "3 problems found."
