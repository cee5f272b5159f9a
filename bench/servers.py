"""Starting the benchmark's servers: upstream (nginx or built-in), floor, proxy, LiteLLM.

Each `start_*` returns the server's origin (`http://127.0.0.1:PORT`) once it answers, or
raises `StartError`. Everything listens on loopback only.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from bench import upstream
from bench.procs import Placement, Processes, free_port

HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0
TEMPLATE = Path(__file__).with_name("nginx.conf.template")
LARGE_MODEL = "bench-32k"
DEFAULT_MODEL = "bench-32k-default"
"""The same window, curated by the default preset (what `curator serve` runs unconfigured)."""
STREAM_MODEL = "bench-stream"
TRICKLE_MODEL = "bench-trickle"


@dataclass(frozen=True, slots=True)
class Upstreams:
    """Where the fixed JSON answers and the SSE streams come from."""

    origin: str
    stream_origin: str
    kind: str
    """"nginx" or "builtin": which server answers the JSON requests."""


def _bin(name: str) -> str | None:
    """A console script of this interpreter's environment, else one on PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else shutil.which(name)


def nginx_binary() -> str | None:
    found = shutil.which("nginx")
    return found or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


def start_upstreams(
    procs: Processes, workdir: Path, plan: upstream.Plan, placement: Placement, kind: str
) -> Upstreams:
    """The built-in upstream always (it alone can pace SSE events in milliseconds), and
    nginx for the JSON answers when `kind` is nginx, or auto and nginx is installed."""
    nginx = nginx_binary()
    if kind == "nginx" and nginx is None:
        raise FileNotFoundError("nginx is not installed (run bench/setup.sh)")
    port = free_port()
    argv = [sys.executable, "-m", "bench.upstream", "--host", HOST, "--port", str(port)]
    argv += ["--sse-events", str(plan.sse_events), "--sse-gap-ms", str(plan.sse_gap_s * 1000)]
    argv += ["--trickle-events", str(plan.trickle_events)]
    argv += ["--trickle-gap-ms", str(plan.trickle_gap_s * 1000)]
    procs.start("upstream", argv, placement=placement)
    builtin = f"http://{HOST}:{port}"
    procs.wait_http("upstream", builtin + "/healthz", START_TIMEOUT_S)
    if nginx is None or kind == "builtin":
        return Upstreams(builtin, builtin, "builtin")
    port = free_port()
    conf = _nginx_conf(workdir / "nginx", port)
    procs.start("nginx", [nginx, "-p", str(conf.parent), "-c", str(conf)], placement=placement)
    origin = f"http://{HOST}:{port}"
    procs.wait_http("nginx", origin + "/healthz", START_TIMEOUT_S)
    return Upstreams(origin, builtin, "nginx")


def _nginx_conf(root: Path, port: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    values = {
        "@USER@": "user root;" if os.geteuid() == 0 else "",
        "@DIR@": str(root),
        "@PORT@": str(port),
        "@CHAT_JSON@": upstream.CHAT_COMPLETION.decode(),
    }
    text = TEMPLATE.read_text()
    for key, value in values.items():
        text = text.replace(key, value)
    conf = root / "nginx.conf"
    conf.write_text(text)
    return conf


def start_floor(
    procs: Processes,
    upstreams: Upstreams,
    placement: Placement,
    *,
    name: str = "floor",
    workers: int = 1,
) -> str:
    port = free_port()
    argv = [sys.executable, "-m", "bench.floor", "--host", HOST, "--port", str(port)]
    argv += ["--upstream", upstreams.origin, "--stream-upstream", upstreams.stream_origin]
    procs.start(name, [*argv, "--workers", str(workers)], placement=placement)
    origin = f"http://{HOST}:{port}"
    procs.wait_http(name, origin + "/healthz", START_TIMEOUT_S)
    return origin


def proxy_available() -> bool:
    return importlib.util.find_spec("proxy.cli.main") is not None and _bin("curator") is not None


def proxy_config(upstreams: Upstreams, port: int, audit: str = "none") -> str:
    """The proxy's config YAML: curating routes (coding-agent, and the default preset for
    `DEFAULT_MODEL`) and passthrough ones, plus the stream routes.

    `audit` is the audit sink (none, sqlite or jsonl), written beside the config.
    """
    return f"""\
server: {{host: {HOST}, port: {port}}}
audit: {{sink: {audit}}}
upstreams:
  up: {{base_url: "{upstreams.origin}/v1"}}
  sse: {{base_url: "{upstreams.stream_origin}/sse/v1"}}
  trickle: {{base_url: "{upstreams.stream_origin}/trickle/v1"}}
models:
  "{LARGE_MODEL}": {{context_window: 32768, encoding: o200k_base}}
  "{DEFAULT_MODEL}": {{context_window: 32768, encoding: o200k_base}}
policies:
  pass: preset:passthrough
  agent: preset:coding-agent
  default: preset:default
routes:
  - {{name: curate, match: {{model: "{LARGE_MODEL}"}}, upstream: up, policy: agent}}
  - {{name: curate-default, match: {{model: "{DEFAULT_MODEL}"}}, upstream: up, policy: default}}
  - {{name: stream, match: {{model: "{STREAM_MODEL}"}}, upstream: sse, policy: agent}}
  - {{name: trickle, match: {{model: "{TRICKLE_MODEL}"}}, upstream: trickle, policy: agent}}
  - {{name: default, upstream: up, policy: pass}}
"""


def start_proxy(
    procs: Processes,
    workdir: Path,
    upstreams: Upstreams,
    placement: Placement,
    audit: str = "none",
    *,
    name: str = "proxy",
    workers: int = 1,
) -> str:
    """`curator serve` as `name`; its config (and audit store) in `workdir/name/`."""
    curator = _bin("curator")
    if curator is None or not proxy_available():
        raise FileNotFoundError("the proxy (curator serve) is not installed")
    port = free_port()
    home = workdir / name
    home.mkdir(exist_ok=True)
    config = home / "curator.yaml"
    config.write_text(proxy_config(upstreams, port, audit))
    argv = [curator, "serve", "--config", str(config), "--host", HOST, "--port", str(port)]
    procs.start(name, [*argv, "--workers", str(workers)], placement=placement)
    origin = f"http://{HOST}:{port}"
    procs.wait_http(name, origin + "/healthz", START_TIMEOUT_S)
    return origin


def litellm_available() -> bool:
    return importlib.util.find_spec("litellm") is not None and _bin("litellm") is not None


def start_litellm(
    procs: Processes, workdir: Path, upstream_origin: str, placement: Placement, model: str
) -> str:
    litellm = _bin("litellm")
    if litellm is None or not litellm_available():
        raise FileNotFoundError("litellm is not installed")
    port = free_port()
    config = workdir / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {model}\n"
        "    litellm_params:\n"
        f"      model: openai/{model}\n"
        f"      api_base: {upstream_origin}/v1\n"
        "      api_key: sk-bench\n"
    )
    argv = [litellm, "--config", str(config), "--host", HOST, "--port", str(port)]
    procs.start("litellm", [*argv, "--num_workers", "1"], placement=placement)
    origin = f"http://{HOST}:{port}"
    procs.wait_http("litellm", origin + "/health/liveliness", START_TIMEOUT_S * 2)
    return origin
