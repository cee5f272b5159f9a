"""docker-compose.yml: valid against the Compose Specification schema, and structurally sound."""

from __future__ import annotations

import copy
import importlib.resources
import json
from typing import Any

import jsonschema
import pytest

from tests.deploy import DEPLOY, compose, mounts


def compose_schema() -> dict[str, Any]:
    # check-jsonschema vendors the compose-spec schema, so validation needs no network.
    vendor = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    schema: dict[str, Any] = json.loads(vendor.joinpath("compose-spec.json").read_text())
    return schema


def validate(data: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(compose_schema()).validate(data)


def services() -> dict[str, Any]:
    found: dict[str, Any] = compose()["services"]
    return found


def test_matches_the_compose_spec_schema() -> None:
    validate(compose())


@pytest.mark.parametrize(
    ("service", "key", "value"),
    [
        ("curator", "healthchek", {"test": ["CMD", "true"]}),
        ("curator", "read_only", ["yes"]),
        ("grafana", "depends_on", 3),
    ],
)
def test_schema_rejects_typos_and_wrong_types(service: str, key: str, value: object) -> None:
    data = copy.deepcopy(compose())
    data["services"][service][key] = value
    with pytest.raises(jsonschema.ValidationError):
        validate(data)


def test_services() -> None:
    assert set(services()) == {"curator", "prometheus", "grafana", "postgres"}
    assert [name for name, s in services().items() if "profiles" in s] == ["postgres"]


def test_the_optional_audit_database() -> None:
    """Started only with `--profile postgres`, reachable only on the compose network; the
    proxy gets its DSN from the environment, never from a committed file."""
    postgres = services()["postgres"]
    assert postgres["profiles"] == ["postgres"]
    assert "ports" not in postgres
    assert postgres["environment"]["POSTGRES_PASSWORD"].startswith("${")
    assert postgres["healthcheck"]["test"][1] == "pg_isready"
    assert "postgres" not in services()["curator"].get("depends_on", {})
    assert services()["curator"]["environment"]["CURATOR_AUDIT_DSN"] == "${CURATOR_AUDIT_DSN:-}"
    assert "dsn: ${CURATOR_AUDIT_DSN}" in (DEPLOY / "config.docker.yaml").read_text()


def test_proxy_is_built_from_the_repo_dockerfile() -> None:
    build = services()["curator"]["build"]
    context = (DEPLOY / build["context"]).resolve()
    assert (context / build["dockerfile"]).is_file()
    assert (context / "pyproject.toml").is_file()


def test_every_bind_mount_exists_and_named_volumes_are_declared() -> None:
    declared = set(compose().get("volumes") or {})
    used = set()
    for name, service in services().items():
        for target, (source, _) in mounts(service).items():
            if source.startswith((".", "/")):
                assert (DEPLOY / source).exists(), f"{name}: {source} -> {target}"
            else:
                assert source in declared, f"{name}: undeclared volume {source}"
                used.add(source)
    assert used == declared, "declared volumes nobody mounts"


def test_bind_mounts_are_read_only() -> None:
    for name, service in services().items():
        for target, (source, read_only) in mounts(service).items():
            if source.startswith("."):
                assert read_only, f"{name}: {source} -> {target} should be :ro"


def test_proxy_runs_read_only_and_unprivileged() -> None:
    curator = services()["curator"]
    assert curator["read_only"] is True
    assert curator["tmpfs"] == ["/tmp"]
    assert curator["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in curator["security_opt"]


def test_api_key_is_taken_from_the_environment() -> None:
    env = services()["curator"]["environment"]
    assert env["OPENAI_API_KEY"].startswith("${OPENAI_API_KEY")


def test_proxy_healthcheck_probes_healthz_without_curl() -> None:
    test = services()["curator"]["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"]
    assert "/healthz" in test[3]
    compile(test[3], "healthcheck", "exec")


def test_startup_order_waits_for_a_healthy_proxy() -> None:
    depends = {name: s.get("depends_on", {}) for name, s in services().items()}
    assert depends["prometheus"]["curator"]["condition"] == "service_healthy"
    assert "prometheus" in depends["grafana"]
    for name, needs in depends.items():
        assert set(needs) <= set(services()) - {name}


def test_published_ports_bind_to_loopback() -> None:
    for name, service in services().items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name}: {port}"
