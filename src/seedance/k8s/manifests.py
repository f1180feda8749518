"""Deployment manifests as data: the single source of ``deploy/`` (``seedancectl k8s render``).

What runs in the cluster (release ``seedance`` in namespace ``seedance-system`` by default):

* ``seedance-extender``: Deployment + Service + RBAC. The extender HTTP server with its node and
  pod informer; one replica (its cluster state lives in memory).
* ``seedance-scheduler``: a second kube-scheduler (upstream image) whose only profile,
  ``seedance-scheduler``, calls the extender (filter, prioritize, bind), configured by the
  ``KubeSchedulerConfiguration`` in a ConfigMap. Pods opt in with ``schedulerName``.
* ``seedance-operator``: Deployment + RBAC; the kopf operator reconciling TrainingJobs into Pods.
* The CRDs and one PriorityClass per SLA tier.

The Helm chart in ``deploy/helm/seedance`` renders the same objects from its templates; a test
renders it with default values and compares it with these, object by object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from seedance import __version__
from seedance.k8s import keys
from seedance.k8s.crds import all_crds
from seedance.k8s.render import priority_classes
from seedance.tiers import DEFAULT_TIER_CONFIG, TierConfig

Obj = dict[str, Any]

#: Labels Helm adds and plain manifests do not carry (ignored when the two are compared).
HELM_ONLY_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")


@dataclass(frozen=True, slots=True)
class DeploySettings:
    """Knobs of the rendered manifests (the Helm chart exposes the same ones as values).

    Attributes:
        release: Name prefix of every object (Helm: the release name).
        namespace: Namespace of the namespaced objects.
        image: Seedance image (extender and operator).
        scheduler_image: Upstream kube-scheduler image; its minor version should match the cluster's.
        policy: Placement policy of the extender (a ``PLACEMENT_POLICIES`` name).
        port: Extender HTTP port.
        weight: Extender priority weight in the scheduler configuration (scores 0..10 x weight x 10).
        node_cache_capable: Whether kube-scheduler sends node names only (the extender watches nodes).
        http_timeout: Extender call timeout (a Go duration).
        scheduler_name: Scheduler profile name pods select with ``spec.schedulerName``.
        tier_config: SLA tiers (PriorityClasses and CRD enums).
    """

    release: str = "seedance"
    namespace: str = "seedance-system"
    image: str = f"ghcr.io/seedance/seedance:{__version__}"
    scheduler_image: str = "registry.k8s.io/kube-scheduler:v1.32.0"
    policy: str = "best-fit"
    port: int = 8888
    weight: int = 5
    node_cache_capable: bool = True
    http_timeout: str = "5s"
    scheduler_name: str = keys.SCHEDULER_NAME
    tier_config: TierConfig = field(default=DEFAULT_TIER_CONFIG)

    def name(self, component: str) -> str:
        """Object name of a component (``seedance-extender``)."""
        return f"{self.release}-{component}"

    @property
    def extender_url(self) -> str:
        """In-cluster URL of the extender Service."""
        return f"http://{self.name('extender')}.{self.namespace}.svc:{self.port}"


def _labels(s: DeploySettings, component: str | None = None) -> dict[str, str]:
    out = {
        "app.kubernetes.io/name": "seedance",
        "app.kubernetes.io/instance": s.release,
        "app.kubernetes.io/part-of": "seedance",
        "app.kubernetes.io/version": __version__,
    }
    if component:
        out["app.kubernetes.io/component"] = component
    return out


def _selector(s: DeploySettings, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "seedance", "app.kubernetes.io/instance": s.release,
            "app.kubernetes.io/component": component}


def _meta(s: DeploySettings, name: str, component: str | None, *, namespaced: bool = True) -> Obj:
    meta: Obj = {"name": name}
    if namespaced:
        meta["namespace"] = s.namespace
    meta["labels"] = _labels(s, component)
    return meta


_POD_SECURITY = {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                 "seccompProfile": {"type": "RuntimeDefault"}}
_CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                       "capabilities": {"drop": ["ALL"]}}


def _deployment(s: DeploySettings, component: str, container: Obj, volumes: list[Obj] | None = None) -> Obj:
    pod_spec: Obj = {
        "serviceAccountName": s.name(component),
        "securityContext": _POD_SECURITY,
        "containers": [container],
    }
    if volumes:
        pod_spec["volumes"] = volumes
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(s, s.name(component), component),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": _selector(s, component)},
            "template": {"metadata": {"labels": _labels(s, component)}, "spec": pod_spec},
        },
    }


def _service_account(s: DeploySettings, component: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(s, s.name(component), component)}


def _cluster_role_binding(s: DeploySettings, name: str, component: str, role: str) -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _meta(s, name, component, namespaced=False),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": s.name(component), "namespace": s.namespace}],
    }


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def scheduler_configuration(s: DeploySettings = DeploySettings()) -> Obj:
    """The ``KubeSchedulerConfiguration`` (kubescheduler.config.k8s.io/v1) that wires in the extender.

    Field names follow k8s.io/kube-scheduler/config/v1 types.go (``Extender``): ``urlPrefix``,
    ``filterVerb``, ``prioritizeVerb``, ``bindVerb``, ``weight``, ``nodeCacheCapable``,
    ``enableHTTPS``, ``httpTimeout``, ``ignorable``.
    """
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": True, "resourceName": s.scheduler_name,
                           "resourceNamespace": s.namespace},
        # Seedance's policies compare every feasible node (as in the simulator), so kube-scheduler must not
        # stop its node scan early (its adaptive default is 34% of 2,000 nodes)
        "profiles": [{"schedulerName": s.scheduler_name, "percentageOfNodesToScore": 100}],
        "extenders": [{
            "urlPrefix": s.extender_url,
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "bindVerb": "bind",
            "weight": s.weight,
            "enableHTTPS": False,
            "nodeCacheCapable": s.node_cache_capable,
            "httpTimeout": s.http_timeout,
            "ignorable": False,
        }],
    }


def extender_objects(s: DeploySettings = DeploySettings()) -> list[Obj]:
    """ServiceAccount, ClusterRole, ClusterRoleBinding, Deployment and Service of the extender."""
    c = "extender"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _meta(s, s.name(c), c, namespaced=False),
        "rules": [
            _rule([""], ["nodes"], ["get", "list", "watch"]),
            _rule([""], ["pods"], ["get", "list", "watch", "patch"]),
            _rule([""], ["pods/binding"], ["create"]),
            _rule(["", "events.k8s.io"], ["events"], ["create", "patch"]),
        ],
    }
    args = ["k8s", "extender", "--host", "0.0.0.0", "--port", str(s.port), "--policy", s.policy]
    container = {
        "name": c,
        "image": s.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["seedancectl"],
        "args": args,
        "ports": [{"name": "http", "containerPort": s.port, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
        "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": _CONTAINER_SECURITY,
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(s, s.name(c), c),
        "spec": {"type": "ClusterIP", "selector": _selector(s, c),
                 "ports": [{"name": "http", "port": s.port, "targetPort": "http", "protocol": "TCP"}]},
    }
    return [_service_account(s, c), role, _cluster_role_binding(s, s.name(c), c, s.name(c)),
            _deployment(s, c, container), service]


def scheduler_objects(s: DeploySettings = DeploySettings()) -> list[Obj]:
    """The second kube-scheduler: RBAC (upstream roles), its configuration and its Deployment.

    RBAC follows the Kubernetes task "Configure Multiple Schedulers": the built-in
    ``system:kube-scheduler`` and ``system:volume-scheduler`` ClusterRoles, the
    ``extension-apiserver-authentication-reader`` Role in kube-system, plus a Role for its own
    leader-election Lease (the built-in role only covers the Lease named ``kube-scheduler``).
    """
    c = "scheduler"
    lease_role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _meta(s, s.name(c) + "-leases", c),
        "rules": [_rule(["coordination.k8s.io"], ["leases"], ["create", "get", "list", "watch", "update"])],
    }
    lease_binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(s, s.name(c) + "-leases", c),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": s.name(c) + "-leases"},
        "subjects": [{"kind": "ServiceAccount", "name": s.name(c), "namespace": s.namespace}],
    }
    auth_reader = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {**_meta(s, s.name(c) + "-auth-reader", c), "namespace": "kube-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "extension-apiserver-authentication-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": s.name(c), "namespace": s.namespace}],
    }
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(s, s.name(c) + "-config", c),
        "data": {"scheduler-config.yaml": yaml.safe_dump(scheduler_configuration(s), sort_keys=False)},
    }
    probe = {"httpGet": {"path": "/healthz", "port": 10259, "scheme": "HTTPS"}, "initialDelaySeconds": 15}
    container = {
        "name": "kube-scheduler",
        "image": s.scheduler_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/usr/local/bin/kube-scheduler"],
        "args": ["--config=/etc/seedance/scheduler-config.yaml", "--v=2"],
        "livenessProbe": probe,
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 10259, "scheme": "HTTPS"}},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": _CONTAINER_SECURITY,
        "volumeMounts": [{"name": "config", "mountPath": "/etc/seedance", "readOnly": True}],
    }
    volumes = [{"name": "config", "configMap": {"name": s.name(c) + "-config"}}]
    return [
        _service_account(s, c),
        _cluster_role_binding(s, s.name(c) + "-kube-scheduler", c, "system:kube-scheduler"),
        _cluster_role_binding(s, s.name(c) + "-volume-scheduler", c, "system:volume-scheduler"),
        auth_reader,
        lease_role,
        lease_binding,
        config,
        _deployment(s, c, container, volumes),
    ]


def operator_objects(s: DeploySettings = DeploySettings()) -> list[Obj]:
    """ServiceAccount, ClusterRole, ClusterRoleBinding and Deployment of the TrainingJob operator."""
    c = "operator"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": _meta(s, s.name(c), c, namespaced=False),
        "rules": [
            _rule([keys.GROUP], ["trainingjobs"], ["get", "list", "watch", "patch", "update"]),
            _rule([keys.GROUP], ["trainingjobs/status"], ["get", "patch", "update"]),
            _rule([keys.GROUP], ["costpolicies", "inferenceservices"], ["get", "list", "watch"]),
            _rule([""], ["pods"], ["get", "list", "watch", "create", "delete", "patch"]),
            _rule([""], ["namespaces"], ["get", "list", "watch"]),
            _rule(["", "events.k8s.io"], ["events"], ["create", "patch"]),
            _rule(["apiextensions.k8s.io"], ["customresourcedefinitions"], ["get", "list", "watch"]),
        ],
    }
    container = {
        "name": c,
        "image": s.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["seedancectl"],
        "args": ["k8s", "operator", "--scheduler-name", s.scheduler_name, "--liveness-port", "8080"],
        "ports": [{"name": "health", "containerPort": 8080, "protocol": "TCP"}],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "health"}, "periodSeconds": 10},
        "resources": {"requests": {"cpu": "100m", "memory": "192Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": _CONTAINER_SECURITY,
    }
    return [_service_account(s, c), role, _cluster_role_binding(s, s.name(c), c, s.name(c)),
            _deployment(s, c, container)]


def namespace_object(s: DeploySettings = DeploySettings()) -> Obj:
    """The Namespace (plain manifests only; Helm installs into ``--namespace --create-namespace``)."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": s.namespace, "labels": _labels(s)}}


def deploy_files(s: DeploySettings = DeploySettings()) -> dict[str, list[Obj]]:
    """Every generated file under ``deploy/``: relative path → its YAML documents."""
    crds = all_crds(s.tier_config)
    files: dict[str, list[Obj]] = {}
    for c in crds:
        base = f"{c['spec']['group']}_{c['spec']['names']['plural']}.yaml"
        files[f"crds/{base}"] = [c]
        files[f"helm/seedance/crds/{base}"] = [c]  # Helm installs crds/ verbatim, before templates
    files.update({
        "manifests/00-namespace.yaml": [namespace_object(s)],
        "manifests/01-priorityclasses.yaml": priority_classes(s.tier_config),
        "manifests/10-extender.yaml": extender_objects(s),
        "manifests/20-scheduler.yaml": scheduler_objects(s),
        "manifests/30-operator.yaml": operator_objects(s),
        "scheduler-config.yaml": [scheduler_configuration(s)],
    })
    return files


def dump_yaml(docs: list[Obj]) -> str:
    """YAML stream of ``docs`` (stable key order, a header comment)."""
    header = "# Generated by `seedancectl k8s render`; edit src/seedance/k8s/ and re-render.\n"
    return header + yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False)
