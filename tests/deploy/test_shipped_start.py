"""Each shipped deployment starts as its instructions say and serves with its proxy key.

docker-compose.yml says: export OPENAI_API_KEY and CURATOR_PROXY_KEY, `docker compose up`.
deploy/k8s/deployment.yaml says: create the two Secrets, `kubectl apply -k`. Here the
container's environment is rendered from those files, `curator serve` runs the image's own
command on 0.0.0.0:8080 in a private network namespace, the deployment's health check must
pass, and a chat request with the proxy key must reach the upstream with the upstream key.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import (
    DEPLOY,
    REPO,
    compose,
    curator_container,
    dockerfile_stages,
    instructions,
    k8s_objects,
    load_yaml,
)
from tests.deploy.shipped import (
    FAKE_UPSTREAM,
    ComposeError,
    Container,
    MissingSecret,
    base_environment,
    compose_environment,
    curator,
    image_command,
    image_workdir,
    interpolate,
    kubernetes_environment,
    netns_prefix,
    start_in_netns,
)

UPSTREAM_KEY = "sk-upstream-test-0123456789abcdef"
PROXY_KEY = "proxy-key-test-fedcba9876543210"
SECRETS = {
    # As the `kubectl create secret` commands in deployment.yaml create them.
    "context-curator-upstream": {"openai-api-key": UPSTREAM_KEY},
    "context-curator-proxy-keys": {"proxy-key": PROXY_KEY},
}

needs_netns = pytest.mark.skipif(
    netns_prefix() is None, reason="needs `unshare --net` (root or user namespaces) and `ip`"
)


def compose_service() -> dict[str, Any]:
    service: dict[str, Any] = compose()["services"]["curator"]
    return service


def exported() -> dict[str, str]:
    """What the compose file's instructions export, the upstream pointed at the fake."""
    return {
        "OPENAI_API_KEY": UPSTREAM_KEY,
        "CURATOR_PROXY_KEY": PROXY_KEY,
        "CURATOR_UPSTREAM": FAKE_UPSTREAM,
    }


def compose_container(tmp_path: Path) -> Container:
    box = Container(tmp_path / "root")
    for spec in compose_service()["volumes"]:
        source, target, *_ = spec.split(":")
        if source.startswith("."):
            box.mount(target, DEPLOY / source)
        else:
            box.path(target).mkdir(parents=True)  # a named volume: empty at first
    return box


def kubernetes_container(tmp_path: Path) -> Container:
    box = Container(tmp_path / "root")
    (mount,) = [m for m in curator_container()["volumeMounts"] if m["name"] == "config"]
    folder = box.path(mount["mountPath"])
    folder.mkdir(parents=True)
    for name, text in k8s_objects()["ConfigMap"]["data"].items():
        (folder / name).write_text(text)
    box.path(image_workdir()).mkdir(parents=True, exist_ok=True)
    return box


def spec(box: Container, argv: list[str], env: dict[str, str], probe: list[str]) -> dict[str, Any]:
    for path in box.root.rglob("*.yaml"):
        path.write_text(box.rewrite(path.read_text()))
    entry, *args = argv
    assert entry == "curator"
    # No BPE files and no network: counting must still be exact (rs_bpe has the tables).
    no_files = box.path("/opt/curator/tiktoken")
    no_files.mkdir(parents=True)
    return {
        "argv": [curator(), *(box.rewrite(a) for a in args)],
        "env": {**base_environment(), "TIKTOKEN_CACHE_DIR": str(no_files), **env},
        "cwd": str(box.path(image_workdir())),
        "probe": probe,
        "upstream_key": UPSTREAM_KEY,
        "proxy_key": PROXY_KEY,
    }


def assert_serves(result: dict[str, Any]) -> None:
    assert result["healthy"], result["stderr"]
    assert result["exit_code"] is None, result["stderr"]
    assert result["chat_status"] == 200, result
    assert result["keyless_status"] == 401, result
    # The client's proxy key never reaches the upstream; the upstream key does.
    assert result["upstream_authorizations"] == [f"Bearer {UPSTREAM_KEY}"], result
    assert UPSTREAM_KEY not in result["stderr"]
    assert PROXY_KEY not in result["stderr"]
    assert "estimating token counts" not in result["stderr"], result["stderr"]


@needs_netns
@pytest.mark.e2e
def test_compose_deployment_starts_and_serves(tmp_path: Path) -> None:
    service = compose_service()
    box = compose_container(tmp_path)
    env = compose_environment(service, exported())
    argv = image_command()[:1] + list(service.get("command") or image_command()[1:])
    probe = service["healthcheck"]["test"]
    assert probe[0] == "CMD"
    assert_serves(start_in_netns(spec(box, argv, env, probe[1:])))


@needs_netns
@pytest.mark.e2e
def test_kubernetes_deployment_starts_and_serves(tmp_path: Path) -> None:
    container = curator_container()
    box = kubernetes_container(tmp_path)
    # The ConfigMap's upstream default is api.openai.com: point it at the fake, as an
    # operator of a self-hosted upstream would, through the variable the config reads.
    env = {**kubernetes_environment(container, SECRETS), "CURATOR_UPSTREAM": FAKE_UPSTREAM}
    argv = image_command()[:1] + list(container["args"])
    probe = container["readinessProbe"]["httpGet"]
    (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == probe["port"]]
    url = f"http://127.0.0.1:{port}{probe['path']}"
    check = ["python", "-c", f"import urllib.request; urllib.request.urlopen({url!r}, timeout=4)"]
    assert_serves(start_in_netns(spec(box, argv, env, check)))


def documented_docker_run() -> list[str]:
    """The `docker run` command in the Dockerfile's header comment, as words."""
    text, collecting = "", False
    for line in (REPO / "Dockerfile").read_text().splitlines():
        body = line.removeprefix("#").strip()
        collecting = collecting or body.startswith("docker run")
        if collecting:
            text += " " + body.removesuffix("\\")
            if not body.endswith("\\"):
                break
    words = shlex.split(text)
    assert words[:2] == ["docker", "run"], text
    return words[2:]


@needs_netns
@pytest.mark.e2e
def test_documented_docker_run_starts_and_serves(tmp_path: Path) -> None:
    words = documented_docker_run()
    box, env, volumes = Container(tmp_path / "root"), {}, ["/tmp"]
    while words[0].startswith("-"):
        flag = words.pop(0)
        if flag == "--read-only":
            continue
        value = words.pop(0)
        if flag == "-e":
            env[value] = exported()[value]  # `-e NAME` passes the caller's variable on
        elif flag == "-v":
            source, target, *_ = value.split(":")
            if source.startswith("$PWD/"):
                box.mount(target, REPO / source.removeprefix("$PWD/"))
            else:
                box.path(target).mkdir(parents=True)
                volumes.append(target)
    assert words == ["context-curator"], "the image's own command, no override"
    # A read-only root: whatever the config writes must land on a volume.
    audit_path = load_yaml(DEPLOY / "config.docker.yaml")["audit"]["path"]
    assert any(audit_path.startswith(v + "/") for v in volumes), audit_path
    (check,) = instructions(dockerfile_stages()[-1], "HEALTHCHECK")
    probe = list(check.value[list(check.value).index("CMD") + 1 :])
    env["CURATOR_UPSTREAM"] = FAKE_UPSTREAM  # the config's own variable for the upstream
    assert_serves(start_in_netns(spec(box, image_command(), env, probe)))


def test_compose_refuses_to_start_without_a_proxy_key() -> None:
    """Compose stops at `up` with a message, rather than the container restart-looping."""
    env = exported()
    del env["CURATOR_PROXY_KEY"]
    with pytest.raises(ComposeError, match="CURATOR_PROXY_KEY"):
        compose_environment(compose_service(), env)


def test_kubernetes_does_not_start_without_the_proxy_key_secret() -> None:
    secrets = {"context-curator-upstream": SECRETS["context-curator-upstream"]}
    with pytest.raises(MissingSecret, match="context-curator-proxy-keys"):
        kubernetes_environment(curator_container(), secrets)
    # The upstream key stays optional: a self-hosted upstream needs none.
    keys_only = {"context-curator-proxy-keys": SECRETS["context-curator-proxy-keys"]}
    assert "OPENAI_API_KEY" not in kubernetes_environment(curator_container(), keys_only)


@pytest.mark.parametrize("value", ["$(date)", "${X:?bad}", "${Y?bad}", "a $ b"])
def test_interpolation_refuses_what_compose_refuses(value: str) -> None:
    """The renderer the tests above trust."""
    with pytest.raises(ComposeError):
        interpolate(value, {"X": ""})


def test_interpolation_expands_as_compose_does() -> None:
    env = {"Z": "", "W": "w"}
    assert interpolate("$$x ${Y:-d} ${Z-e} ${Z:-f} $W ${W:?no} ${Y}", env) == "$x d  f w w "


def test_serve_without_the_proxy_key_says_which_variable(tmp_path: Path) -> None:
    """Run by hand without CURATOR_PROXY_KEY, the config names the variable and its line."""
    box = compose_container(tmp_path)
    env = {**base_environment(), "OPENAI_API_KEY": UPSTREAM_KEY}
    config = box.path("/etc/curator/config.yaml")
    done = subprocess.run(
        [curator(), "check", "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "auth.keys[0]: environment variable 'CURATOR_PROXY_KEY' is not set" in done.stderr
