"""The benchmark harness in its quick mode: it runs, prints every row, saves the table, and
leaves no process behind. Figures are checked for presence only, never against targets."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from bench import servers

REPO = Path(__file__).resolve().parents[2]
PROXY_ROWS = {
    ("small body, req/s", "proxy passthrough"),
    ("small body, req/s", "proxy default preset (nothing to cut)"),
    ("small body, req/s", "proxy coding-agent (nothing to cut)"),
    ("small body, concurrency 1", "proxy passthrough"),
    ("large 127k -> 32k, warm", "proxy coding-agent"),
    ("large 127k -> 32k, cold", "tiktoken alone (in-process)"),
    ("large 127k -> 32k, cold", "proxy coding-agent, first sight"),
    ("large 127k -> 32k, warm", "proxy default preset"),
    ("large 127k -> 32k, cold", "proxy default preset, first sight"),
    ("stream, time to first byte", "proxy coding-agent"),
    ("stream TTFB under cold 127k load", "proxy, idle"),
    ("stream TTFB under cold 127k load", "proxy, 2 clients sending cold 127k bodies"),
    ("memory, 50 slow streams", "proxy coding-agent"),
    ("memory, 5 slow 127k-token streams", "proxy coding-agent"),
    ("audit off vs sqlite", "flat out, audit off"),
    ("audit off vs sqlite", "flat out, audit sqlite"),
    ("audit off vs sqlite", "fixed rate, audit off"),
    ("audit off vs sqlite", "fixed rate, audit sqlite"),
    ("scale-out, req/s", "proxy passthrough, 1 worker"),
    ("scale-out, req/s", "proxy passthrough, 2 workers"),
    ("scale-out, req/s", "floor, 1 worker"),
    ("scale-out, req/s", "floor, 2 workers"),
}
OTHER_ROWS = {
    ("small body, req/s", "direct upstream (builtin)"),
    ("small body, req/s", "floor (starlette+aiohttp)"),
    ("small body, req/s", "litellm proxy"),
    ("small body, concurrency 1", "direct upstream"),
    ("small body, concurrency 1", "floor"),
    ("large 127k -> 32k, warm", "floor"),
    ("stream, time to first byte", "direct upstream (builtin)"),
    ("stream, time to first byte", "floor"),
    ("memory, 50 slow streams", "floor"),
    ("memory, 5 slow 127k-token streams", "floor"),
}
TARGETED = {
    ("small body, req/s", "proxy passthrough"),
    ("small body, req/s", "proxy default preset (nothing to cut)"),
    ("small body, concurrency 1", "proxy passthrough"),
    ("large 127k -> 32k, warm", "proxy coding-agent"),
    ("large 127k -> 32k, cold", "proxy coding-agent, first sight"),
    ("large 127k -> 32k, warm", "proxy default preset"),
    ("large 127k -> 32k, cold", "proxy default preset, first sight"),
    ("stream, time to first byte", "proxy coding-agent"),
    ("stream TTFB under cold 127k load", "proxy, 2 clients sending cold 127k bodies"),
    ("memory, 50 slow streams", "proxy coding-agent"),
    ("audit off vs sqlite", "fixed rate, audit sqlite"),
    ("scale-out, req/s", "proxy passthrough, 2 workers"),
}


def _run(out: Path, *args: str) -> tuple[str, str]:
    """Run the harness; return (stdout, run marker). Fails the test on a non-zero exit."""
    marker = uuid.uuid4().hex
    env = {**os.environ, "CURATOR_BENCH_TEST_RUN": marker}
    return _module("bench.run", "--quick", "--out", str(out), *args, env=env), marker


def _module(name: str, *args: str, env: dict[str, str] | None = None) -> str:
    """`python -m name args` from the repository; its stdout. Fails the test on an error."""
    done = subprocess.run(
        [sys.executable, "-m", name, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _table(text: str) -> dict[tuple[str, str], dict[str, str]]:
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[1:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        rows[(cells["case"], cells["path"])] = cells
    return rows


def _survivors(marker: str) -> list[int]:
    """Processes still carrying this run's marker in their environment."""
    found = []
    needle = f"CURATOR_BENCH_TEST_RUN={marker}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _number(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_quick_run_prints_every_row_and_cleans_up(tmp_path: Path) -> None:
    stdout, marker = _run(tmp_path, "--upstream", "builtin", "--load", "python")
    rows = _table(stdout)
    assert set(rows) == PROXY_ROWS | OTHER_ROWS
    for path in ("direct upstream (builtin)", "floor (starlette+aiohttp)"):
        assert _number(rows[("small body, req/s", path)]["req/s"]) > 0
    assert _number(rows[("large 127k -> 32k, warm", "floor")]["p50 ms"]) > 0
    assert _number(rows[("stream, time to first byte", "floor")]["p50 ms"]) > 0
    assert "MB RSS" in rows[("memory, 50 slow streams", "floor")]["figure"]
    assert "KB a stream over idle" in rows[("memory, 5 slow 127k-token streams", "floor")]["figure"]
    if servers.proxy_available():
        for row in TARGETED:
            assert rows[row]["met"] in ("yes", "**no**"), rows[row]
            assert "skipped" not in rows[row]["figure"], rows[row]
    else:
        for row in PROXY_ROWS:
            assert "skipped" in rows[row]["figure"]
    (saved,) = tmp_path.glob("*.md")
    assert _table(saved.read_text()) == rows
    assert _survivors(marker) == []


@pytest.mark.skipif(
    shutil.which("wrk") is None or servers.nginx_binary() is None,
    reason="nginx and wrk not installed (bench/setup.sh installs them)",
)
def test_quick_run_with_nginx_and_wrk(tmp_path: Path) -> None:
    cases = "small,audit"
    stdout, marker = _run(tmp_path, "--upstream", "nginx", "--load", "wrk", "--cases", cases)
    rows = _table(stdout)
    direct = rows[("small body, req/s", "direct upstream (nginx)")]
    assert _number(direct["req/s"]) > 0
    assert _number(rows[("small body, req/s", "floor (starlette+aiohttp)")]["req/s"]) > 0
    assert "load: wrk" in stdout
    if servers.proxy_available():
        # Paced wrk: each connection thinks between requests, so the rate is held.
        paced = rows[("audit off vs sqlite", "fixed rate, audit off")]
        rate = _number(paced["figure"].removesuffix("/s"))
        assert 0 < _number(paced["req/s"]) <= 1.3 * rate
        # Flat out, each side's server CPU per request, and the audited one's ratio to it.
        off = rows[("audit off vs sqlite", "flat out, audit off")]["figure"]
        off_us = _number(off.removesuffix(" us CPU/request"))
        on = rows[("audit off vs sqlite", "flat out, audit sqlite")]["figure"]
        on_us, ratio = on.split("; ")[1].removesuffix("x)").split(" us CPU/request (")
        assert off_us > 0
        assert _number(ratio) == pytest.approx(_number(on_us) / off_us, abs=0.01)
    assert _survivors(marker) == []


def test_sigterm_mid_run_stops_every_process(tmp_path: Path) -> None:
    marker = uuid.uuid4().hex
    env = {**os.environ, "CURATOR_BENCH_TEST_RUN": marker}
    argv = [sys.executable, "-m", "bench.run", "--quick", "--cases", "stream", "--out"]
    with subprocess.Popen(
        [*argv, str(tmp_path), "--upstream", "builtin"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("running case"):
                break  # the servers are up: the run is in the middle of its work
        assert _survivors(marker), "the run should have started its servers by now"
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode != 0
    assert list(tmp_path.glob("*.md")) == []
    assert _survivors(marker) == []


def test_the_responses_bench_prints_its_rounds_and_the_median_round() -> None:
    lines = _module("bench.responses_bench", "--runs", "1", "--rounds", "3").splitlines()
    (rounds,) = [ln for ln in lines if ln.startswith("rounds, sorted: ")]
    ratios = [float(r) for r in rounds.removeprefix("rounds, sorted: ").split(" (")[0].split(", ")]
    assert len(ratios) == 3
    assert ratios == sorted(ratios)
    # The table is the median round's: its two times give the verdict's ratio.
    times = {
        ln.split("|")[1].strip(): float(ln.split("|")[3].strip().removesuffix(" ms"))
        for ln in lines
        if ln.startswith(("| chat completions |", "| Responses |"))
    }
    assert times["Responses"] / times["chat completions"] == pytest.approx(ratios[1], abs=0.01)
    assert lines[-1].startswith(f"Responses / chat: {ratios[1]:.3f} (target <= 1.1: ")


def test_the_client_bench_gives_each_client_a_row_against_h1client() -> None:
    out = _module("bench.client_bench", "--requests", "64", "--concurrency", "4", "--rounds", "2")
    rows = {
        ln.split("|")[1].strip(): ln.split("|")[3].strip()
        for ln in out.splitlines()
        if ln.startswith("| ") and "x |" in ln
    }
    assert set(rows) == {"H1Client", "aiohttp", "httpx"}
    assert rows["H1Client"] == "1.00x"
    assert all(float(ratio.removesuffix("x")) > 0 for ratio in rows.values())


def test_the_app_bench_gives_every_configuration_a_row_and_the_differences() -> None:
    out = _module("bench.app_bench", "--requests", "64", "--rounds", "1")
    rows = {
        ln.split("|")[1].strip(): ln.split("|")[2].strip()
        for ln in out.splitlines()[3:]
        if ln.startswith("| ")
    }
    assert set(rows) == {
        "passthrough, audit off",
        "passthrough, audit sqlite",
        "default, audit off",
        "default",
        "default, audit off, otel on",
    }
    assert all(float(us) > 0 for us in rows.values())
    assert "the SQLite audit adds" in out.splitlines()[-2]
    assert "OpenTelemetry export (traces and metrics, OTLP/HTTP) adds" in out.splitlines()[-1]
