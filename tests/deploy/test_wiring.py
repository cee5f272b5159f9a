"""The deployment files agree with each other: ports, paths, users, scrape targets, dashboards."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from tests.deploy import (
    DEPLOY,
    compose,
    curator_container,
    dockerfile_stages,
    flag_value,
    instructions,
    k8s_config,
    k8s_objects,
    load_yaml,
    mounts,
    url_parts,
)

GRAFANA = DEPLOY / "grafana"


def docker_config() -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(DEPLOY / "config.docker.yaml")
    return data


def service(name: str) -> dict[str, Any]:
    found: dict[str, Any] = compose()["services"][name]
    return found


def image_cmd() -> list[str]:
    (cmd,) = instructions(dockerfile_stages()[-1], "CMD")
    return list(cmd.value)


def mount_target(service_name: str, source: str) -> str:
    (target,) = [t for t, (s, _) in mounts(service(service_name)).items() if s == source]
    return target


def published(service_name: str) -> dict[int, int]:
    """container port -> host port."""
    found = {}
    for spec in service(service_name).get("ports", []):
        *_, host, container = spec.split(":")
        found[int(container)] = int(host)
    return found


def test_configs_bind_all_interfaces_on_the_image_port() -> None:
    (expose,) = instructions(dockerfile_stages()[-1], "EXPOSE")
    port = int(expose.value[0])
    for config in (docker_config(), k8s_config()):
        assert config["server"]["host"] == "0.0.0.0"
        assert config["server"]["port"] == port
    assert port in published("curator")


def test_image_cmd_reads_the_mounted_configs() -> None:
    path = flag_value(image_cmd(), "--config")
    assert mount_target("curator", "./config.docker.yaml") == path
    config_dir = PurePosixPath(path).parent
    assert PurePosixPath(path).name in k8s_objects()["ConfigMap"]["data"]
    mount_paths = {m["mountPath"] for m in curator_container()["volumeMounts"]}
    assert str(config_dir) in mount_paths


def test_kubernetes_runs_the_image_cmd_as_the_image_user() -> None:
    assert curator_container()["args"] == image_cmd()
    assert "command" not in curator_container(), "keep the image's ENTRYPOINT"
    (user,) = instructions(dockerfile_stages()[-1], "USER")
    uid, gid = (int(n) for n in user.value[0].split(":"))
    security = curator_container()["securityContext"]
    assert (security["runAsUser"], security["runAsGroup"]) == (uid, gid)


def test_compose_healthcheck_repeats_the_image_healthcheck() -> None:
    (check,) = instructions(dockerfile_stages()[-1], "HEALTHCHECK")
    assert service("curator")["healthcheck"]["test"] == list(check.value)


def test_docker_config_policy_files_are_mounted_beside_it() -> None:
    config_dir = PurePosixPath(mount_target("curator", "./config.docker.yaml")).parent
    files = [p for p in docker_config()["policies"].values() if isinstance(p, str)]
    files = [p for p in files if not p.startswith("preset:")]
    assert files
    for name in files:
        assert (DEPLOY / name).is_file(), name
        folder = PurePosixPath(name).parent
        assert mount_target("curator", f"./{folder}") == str(config_dir / folder), name


def test_docker_audit_log_lives_on_the_data_volume() -> None:
    audit = docker_config()["audit"]
    assert audit["sink"] == "sqlite"
    data_dir = PurePosixPath(audit["path"]).parent
    source, read_only = mounts(service("curator"))[str(data_dir)]
    assert source in compose()["volumes"]
    assert not read_only
    (workdir,) = instructions(dockerfile_stages()[-1], "WORKDIR")
    assert workdir.value == (str(data_dir),), "the image prepares this folder for its user"


def test_prometheus_scrapes_the_proxy_metrics_endpoint() -> None:
    prometheus = load_yaml(DEPLOY / "prometheus.yml")
    metrics = docker_config()["metrics"]
    assert metrics["enabled"] is True
    (job,) = prometheus["scrape_configs"]
    (static,) = job["static_configs"]
    (target,) = static["targets"]
    host, port = target.split(":")
    assert host in compose()["services"]
    assert int(port) == metrics["port"]
    assert job["metrics_path"] == metrics["path"]
    assert metrics["port"] not in published("curator"), "metrics stay on the compose network"
    config_target = mount_target("prometheus", "./prometheus.yml")
    assert f"--config.file={config_target}" in service("prometheus")["command"]


def test_grafana_datasource_points_at_compose_prometheus() -> None:
    (source,) = load_yaml(GRAFANA / "provisioning" / "datasources" / "prometheus.yml")[
        "datasources"
    ]
    host, port, _ = url_parts(source["url"])
    assert host == "prometheus"
    assert port in published("prometheus")
    assert source["type"] == "prometheus"
    assert source["isDefault"] is True
    scrape = load_yaml(DEPLOY / "prometheus.yml")["global"]["scrape_interval"]
    assert source["jsonData"]["timeInterval"] == scrape


def test_grafana_provisioning_and_dashboards_are_mounted_where_grafana_looks() -> None:
    assert mount_target("grafana", "./grafana/provisioning") == "/etc/grafana/provisioning"
    for kind in ("datasources", "dashboards"):
        assert list((GRAFANA / "provisioning" / kind).glob("*.yml")), kind
    (provider,) = load_yaml(GRAFANA / "provisioning" / "dashboards" / "provider.yml")["providers"]
    dashboards_dir = mount_target("grafana", "./grafana/dashboards")
    assert provider["options"]["path"] == dashboards_dir
    assert provider["type"] == "file"
    home = PurePosixPath(
        service("grafana")["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    )
    assert str(home.parent) == dashboards_dir
    assert (GRAFANA / "dashboards" / home.name).is_file()
