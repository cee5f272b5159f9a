"""Kubernetes manifests: valid against the API's JSON schemas (offline), secure, wired together."""

from __future__ import annotations

import copy
import re
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.deploy import DEPLOY, K8S, curator_container, flag_value, k8s_config, k8s_objects

# The oldest Kubernetes minor still commonly run, and the newest schema set bundled.
K8S_VERSIONS = ("1.30", kubernetes_validate.latest_version())
DURATION = {"type": "string", "pattern": r"^(0|([0-9]+(ms|s|m|h|d|w|y))+)$"}
LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
# kubernetes-validate ships no schemas for CRDs: this covers the ServiceMonitor fields used here
# with the operator CRD's types, and rejects unknown keys as the CRD's structural schema does.
SERVICE_MONITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "labels": LABELS},
        },
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"matchLabels": LABELS, "matchExpressions": {"type": "array"}},
                },
                "namespaceSelector": {"type": "object"},
                "jobLabel": {"type": "string"},
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": DURATION,
                            "scrapeTimeout": DURATION,
                            "honorLabels": {"type": "boolean"},
                        },
                    },
                },
            },
        },
    },
}


def validate(obj: dict[str, Any], version: str) -> None:
    if obj["apiVersion"].startswith("monitoring.coreos.com/"):
        jsonschema.Draft202012Validator(SERVICE_MONITOR_SCHEMA).validate(obj)
    else:
        kubernetes_validate.validate(obj, version, strict=True)


def template_labels() -> dict[str, str]:
    labels: dict[str, str] = k8s_objects()["Deployment"]["spec"]["template"]["metadata"]["labels"]
    return labels


def quantity(value: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(m|Ki|Mi|Gi)?", str(value))
    assert match, value
    scale = {None: 1, "m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}[match.group(2)]
    return float(match.group(1)) * scale


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("kind", sorted(k8s_objects()))
def test_manifest_matches_the_api_schema(kind: str, version: str) -> None:
    validate(k8s_objects()[kind], version)


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("Deployment", ("spec", "replica"), 2),
        ("Deployment", ("spec", "replicas"), "two"),
        ("HorizontalPodAutoscaler", ("spec", "minReplica"), 2),
        ("ServiceMonitor", ("spec", "endpoint"), []),
        ("ServiceMonitor", ("spec", "endpoints", 0, "interval"), "15 seconds"),
    ],
)
def test_validation_rejects_typos_and_wrong_types(
    kind: str, path: tuple[str | int, ...], value: object
) -> None:
    obj = copy.deepcopy(k8s_objects()[kind])
    parent: Any = obj
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        validate(obj, K8S_VERSIONS[-1])


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)
    assert kustomization["namespace"] == k8s_objects()["Namespace"]["metadata"]["name"]
    image = curator_container()["image"].split(":")[0]
    assert [i["name"] for i in kustomization["images"]] == [image]


def test_selectors_pick_the_proxy_pods() -> None:
    objects = k8s_objects()
    labels = template_labels().items()
    deployment = objects["Deployment"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels
    assert objects["Service"]["spec"]["selector"].items() <= labels
    assert objects["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels
    monitor = objects["ServiceMonitor"]["spec"]["selector"]["matchLabels"].items()
    assert monitor <= objects["Service"]["metadata"]["labels"].items()
    (spread,) = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["labelSelector"]["matchLabels"].items() <= labels
    target = objects["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == (
        deployment["apiVersion"],
        "Deployment",
        deployment["metadata"]["name"],
    )


def test_replicas_autoscaling_and_disruption_budget_agree() -> None:
    objects = k8s_objects()
    replicas = objects["Deployment"]["spec"]["replicas"]
    hpa = objects["HorizontalPodAutoscaler"]["spec"]
    assert replicas >= 2
    assert 2 <= hpa["minReplicas"] <= replicas <= hpa["maxReplicas"]
    (metric,) = hpa["metrics"]
    assert metric["resource"]["name"] == "cpu"
    # A budget of minReplicas or more would block every voluntary eviction.
    assert objects["PodDisruptionBudget"]["spec"]["minAvailable"] < hpa["minReplicas"]
    assert objects["Deployment"]["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_probes_hit_healthz_on_the_serving_port() -> None:
    container = curator_container()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("readinessProbe", "livenessProbe"):
        check = container[probe]["httpGet"]
        assert check["path"] == "/healthz", probe
        assert ports[check["port"]] == k8s_config()["server"]["port"], probe
    assert int(flag_value(container["args"], "--port")) == ports["http"]


def test_container_is_locked_down() -> None:
    pod = k8s_objects()["Deployment"]["spec"]["template"]["spec"]
    security = curator_container()["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] >= 1000
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False


def test_resources_have_requests_within_limits() -> None:
    resources = curator_container()["resources"]
    for name in ("cpu", "memory"):
        assert 0 < quantity(resources["requests"][name]) <= quantity(resources["limits"][name])


def test_writable_tmp_and_read_only_config_volumes() -> None:
    pod = k8s_objects()["Deployment"]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    by_path = {m["mountPath"]: m for m in curator_container()["volumeMounts"]}
    assert "emptyDir" in volumes[by_path["/tmp"]["name"]]
    config_dir = flag_value(curator_container()["args"], "--config").rsplit("/", 1)[0]
    config_mount = by_path[config_dir]
    assert config_mount["readOnly"] is True
    # subPath mounts never see ConfigMap updates, so config reloads would not happen.
    assert "subPath" not in config_mount
    config_map = k8s_objects()["ConfigMap"]
    assert volumes[config_mount["name"]]["configMap"]["name"] == config_map["metadata"]["name"]


def test_api_key_comes_from_a_secret_reference() -> None:
    env = {e["name"]: e for e in curator_container()["env"]}
    key = env["OPENAI_API_KEY"]
    assert "value" not in key
    assert set(key["valueFrom"]["secretKeyRef"]) >= {"name", "key"}
    assert "Secret" not in k8s_objects(), "secrets are created in the cluster, never committed"
    assert k8s_config()["upstreams"]["openai"]["api_key"].startswith("${OPENAI_API_KEY")


def test_shutdown_drains_streams() -> None:
    pod = k8s_objects()["Deployment"]["spec"]["template"]["spec"]
    command = curator_container()["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    pause = int(command[1])
    assert pause >= 5, "endpoints need a moment to drop the pod before SIGTERM"
    assert pod["terminationGracePeriodSeconds"] >= pause + 60, "room for streams to finish"


def test_metrics_port_and_path_agree_everywhere() -> None:
    objects = k8s_objects()
    metrics = k8s_config()["metrics"]
    ports = {p["name"]: p["containerPort"] for p in curator_container()["ports"]}
    annotations = objects["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert metrics["enabled"] is True
    assert ports["metrics"] == metrics["port"] == int(annotations["prometheus.io/port"])
    assert annotations["prometheus.io/scrape"] == "true"
    (endpoint,) = objects["ServiceMonitor"]["spec"]["endpoints"]
    assert annotations["prometheus.io/path"] == endpoint["path"] == metrics["path"]
    service_ports = {p["name"]: p for p in objects["Service"]["spec"]["ports"]}
    assert service_ports[endpoint["port"]]["targetPort"] == "metrics"
    assert service_ports["http"]["targetPort"] == "http"


def test_the_audit_dsn_comes_from_an_optional_secret() -> None:
    env = {e["name"]: e for e in curator_container()["env"]}
    dsn = env["CURATOR_AUDIT_DSN"]
    assert "value" not in dsn
    assert dsn["valueFrom"]["secretKeyRef"]["optional"] is True
    assert "dsn: ${CURATOR_AUDIT_DSN}" in k8s_objects()["ConfigMap"]["data"]["config.yaml"]


def test_audit_goes_to_stdout_as_jsonl() -> None:
    assert k8s_config()["audit"]["sink"] == "jsonl"
    assert k8s_config()["audit"]["path"] == "-"


def test_configmap_carries_the_policy_files_it_names() -> None:
    data = k8s_objects()["ConfigMap"]["data"]
    files = [p for p in k8s_config()["policies"].values() if isinstance(p, str)]
    files = [p for p in files if not p.startswith("preset:")]
    assert files, "the ConfigMap should show how a policy file is shipped"
    for name in files:
        assert name in data, name
        assert yaml.safe_load(data[name]) == yaml.safe_load(
            (DEPLOY / "policies" / name).read_text()
        ), f"{name} differs from deploy/policies/{name}"
