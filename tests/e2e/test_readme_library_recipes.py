"""README.md's LangChain, LiteLLM and pydantic-ai recipes, with the real libraries (the
`recipes` extra), each copied from README and run as a newcomer runs it: against a real
`curator serve` process on README's "save money on agents" config, started in its own folder
(its upstream a strict fake on loopback), the recipe's code changed only in the proxy's
address and run as a script of its own (`python -c`: the library's client caches, event
loops and warnings stay in that process, as in the newcomer's); it must warn of nothing it
does itself (a renamed or deprecated name in the recipe). Then its proof, README's own
`curator audit list` command, must show the request.

One `curator serve` for the module: starting it is most of what these tests cost, after
importing the libraries."""

from __future__ import annotations

import importlib.util
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from proxy.cli.main import main
from tests.e2e.test_readme_recipes import PROXY, README, goal_config, recipe
from tests.e2e.test_workers import free_port
from tests.fakes.servers import HOST, ServerThread
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e

SCRIPT_S = 90.0
"""Bound for a recipe's script, its imports included, on a loaded machine."""
STARTUP_S = 60.0
"""Bound for `curator serve` to answer /healthz on a loaded machine; not a speed check."""
AUDIT_S = 10.0
"""Bound for the server's audit writer to have written a request's record."""


def needs(module: str) -> pytest.MarkDecorator:
    """Skip without the `recipes` extra, before the module's `curator serve` starts."""
    missing = importlib.util.find_spec(module) is None
    return pytest.mark.skipif(missing, reason=f"no {module}: pip install -e '.[recipes]'")


def proof_command() -> list[str]:
    """README's `curator audit list` line, as given under "Client recipes"."""
    section = README.split("\n## Client recipes\n", 1)[1]
    line = next(ln for ln in section.splitlines() if "curator audit list" in ln)
    words = shlex.split(line.split("#", 1)[0])
    assert words[0] == ".venv/bin/curator", line
    return words[1:]


def offline_setting(heading: str) -> tuple[str, str]:
    """The variable README's recipe says to set offline: "(Offline, `NAME=value` ...)"."""
    section = README.split(f"\n### {heading}\n", 1)[1].split("\n### ", 1)[0]
    match = re.search(r"\(Offline,\s+`(\w+)=(\w+)`", section)
    assert match, f"README's {heading!r} recipe has no offline note"
    return match.group(1), match.group(2)


@dataclass(frozen=True, slots=True)
class Served:
    origin: str
    folder: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`curator serve --config config.yaml` in a folder of its own: the audit log README's
    proof reads, ./curator-audit.db, lands there."""
    folder = tmp_path_factory.mktemp("recipes")
    port = free_port()
    with ServerThread(FakeOpenAI(windows={"gpt-4o-mini": 128_000}).app) as fake:
        config = goal_config("Save money on agents")
        config["upstreams"]["openai"]["base_url"] = f"{fake.origin}/v1"
        config["server"] = {"host": HOST, "port": port}
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        command = [str(Path(sys.executable).parent / "curator"), "serve", "--config"]
        log = folder / "serve.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [*command, "config.yaml"], cwd=folder, stdout=out, stderr=subprocess.STDOUT
            )
        try:
            origin = f"http://{HOST}:{port}"
            wait_until_healthy(origin, process, log)
            yield Served(origin, folder)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)


def wait_until_healthy(origin: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(f"{origin}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"curator serve never came up:\n{log.read_text()}")


@pytest.fixture
def folder(served: Served, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The newcomer's shell: in the proxy's folder, a key set, no base URL of their own."""
    monkeypatch.chdir(served.folder)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-recipe")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return served.folder


def audit_rows(capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    """README's proof command, run in the proxy's folder: its table's rows, newest first."""
    capsys.readouterr()
    status = main(proof_command())
    printed = capsys.readouterr()
    if status == 1 and "no audit store" in printed.err:
        return []  # nothing recorded yet: the writer creates the store, then its tables
    assert status == 0, printed.err
    lines = printed.out.strip().splitlines()
    return [line.split() for line in lines[1:]] if lines[0].startswith("TIME") else []


def new_row(seen: list[list[str]], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The newest record once it is one the proof did not show before the recipe ran."""
    ids = {row[1] for row in seen}
    deadline = time.monotonic() + AUDIT_S
    while time.monotonic() < deadline:
        rows = audit_rows(capsys)
        if rows and rows[0][1] not in ids:
            return rows[0]
        time.sleep(0.05)
    raise AssertionError(f"no new audit record; the proof shows {rows}")


def run_script(code: str, origin: str) -> str:
    """The recipe as `python recipe.py` runs it, in the newcomer's environment; its stdout."""
    assert PROXY in code
    done = subprocess.run(
        [sys.executable, "-c", code.replace(PROXY, origin)],
        capture_output=True,
        text=True,
        timeout=SCRIPT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # Python shows a DeprecationWarning when the script's own code triggers it; LiteLLM logs
    # a WARNING when it cannot download its price list (README's offline note avoids it).
    assert "warning" not in done.stderr.lower(), done.stderr
    return done.stdout


def check_recipe(heading: str, served: Served, capsys: pytest.CaptureFixture[str]) -> str:
    """Run README's recipe under `### heading`; its proof must list the request it made."""
    seen = audit_rows(capsys)
    out = run_script(recipe(heading, "python"), served.origin)
    assert "Hello from the fake upstream." in out  # the upstream's answer, relayed
    row = new_row(seen, capsys)
    assert row[2:7] == ["chat", "all", "agents", "gpt-4o-mini", "200"], row
    assert int(row[7]) > 0, row  # the tokens the proxy counted before curating
    return out


@needs("langchain_openai")
@pytest.mark.usefixtures("folder")
def test_the_langchain_recipe_goes_through_the_proxy(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    out = check_recipe("LangChain", served, capsys)
    route, after = out.strip().splitlines()[-1].split(" ")
    assert route == "all"
    assert int(after) > 0


@needs("litellm")
@pytest.mark.usefixtures("folder")
def test_the_litellm_recipe_goes_through_the_proxy(
    served: Served, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, value = offline_setting("LiteLLM as a client")
    monkeypatch.setenv(name, value)
    check_recipe("LiteLLM as a client", served, capsys)


@needs("pydantic_ai")
@pytest.mark.usefixtures("folder")
def test_the_pydantic_ai_recipe_goes_through_the_proxy(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    check_recipe("pydantic-ai", served, capsys)
