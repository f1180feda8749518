"""``seedancectl k8s``: render and validate manifests, run the scheduler extender and the operator."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any

import typer


class Fmt(StrEnum):
    """Output formats."""

    yaml = "yaml"
    json = "json"


def register(app: typer.Typer) -> None:
    """Add the ``k8s`` command group."""
    k8s = typer.Typer(help="Kubernetes: manifests, scheduler extender, TrainingJob operator.", no_args_is_help=True)
    app.add_typer(k8s, name="k8s")

    @k8s.command("render")
    def render(
        out: Path = typer.Option(Path("deploy"), "--out", help="Folder to write (deploy/ of the repository)."),
        check: bool = typer.Option(False, "--check", help="Only compare; exit 1 if a file differs or is missing."),
        namespace: str = typer.Option("seedance-system", help="Namespace of the namespaced objects."),
        release: str = typer.Option("seedance", help="Name prefix of the objects."),
        image: str | None = typer.Option(None, help="Seedance image (default ghcr.io/seedance/seedance:<version>)."),
        policy: str = typer.Option("best-fit", help="Placement policy of the extender."),
    ) -> None:
        """Write the CRDs, plain manifests and scheduler configuration generated from the code."""
        import dataclasses

        from seedance.k8s.manifests import DeploySettings, deploy_files, dump_yaml
        from seedance.scheduling import PLACEMENT_POLICIES

        settings = DeploySettings(namespace=namespace, release=release, policy=PLACEMENT_POLICIES.get(policy).name)
        if image:
            settings = dataclasses.replace(settings, image=image)
        stale = []
        for rel, docs in deploy_files(settings).items():
            path = out / rel
            text = dump_yaml(docs)
            if check:
                if not path.is_file() or path.read_text(encoding="utf-8") != text:
                    stale.append(str(path))
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            typer.echo(f"wrote {path}")
        if stale:
            typer.echo("out of date (run `seedancectl k8s render`): " + ", ".join(stale), err=True)
            raise typer.Exit(1)

    @k8s.command("pod-fragment")
    def pod_fragment(
        tier: str = typer.Argument(..., help="SLA tier (gold, silver, bronze)."),
        borrow: bool = typer.Option(False, help="Also admit the tier's borrow-label nodes."),
        scheduler_name: str | None = typer.Option(None, help="Set spec.schedulerName."),
        output: Fmt = typer.Option(Fmt.yaml, "--output", "-o", help="Output format."),
    ) -> None:
        """Print the Pod fragment (node affinity, tolerations, priority class, labels) of a tier."""
        from seedance.k8s.render import pod_spec_fragment

        frag = pod_spec_fragment(tier, borrow=borrow, scheduler_name=scheduler_name)
        if output is Fmt.json:
            typer.echo(json.dumps(frag, indent=2))
        else:
            import yaml

            typer.echo(yaml.safe_dump(frag, sort_keys=False), nl=False)

    @k8s.command("validate")
    def validate(
        paths: list[Path] = typer.Argument(..., help="YAML files or folders (searched for *.yaml)."),
        kube_version: str = typer.Option("1.32.0", help="Kubernetes schema version (1.25-1.37)."),
    ) -> None:
        """Validate manifests offline (built-in kinds, Seedance CRs, KubeSchedulerConfiguration)."""
        from seedance.core.errors import InputError
        from seedance.core.yamldoc import compose_all
        from seedance.k8s.validation import object_errors, render_chart

        charts = sorted({c.parent for p in paths if p.is_dir() for c in p.rglob("Chart.yaml")})
        files: list[Path] = []
        for p in paths:
            if p.is_dir():
                files += [f for f in sorted(p.rglob("*.yaml"))
                          if f.name != "Chart.yaml" and not any(c in f.parents for c in charts)]
            else:
                files.append(p)
        sources: list[tuple[str, list[Any]]] = []
        for f in files:
            try:
                text = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"cannot read YAML: {exc}", source=str(f)) from None
            sources.append((str(f), [d for _, d in compose_all(text, source=str(f)) if d]))
        for c in charts:
            sources += [(f"{c} (rendered) {path}", [doc]) for path, doc in render_chart(c)]
        bad = 0
        count = 0
        for src, docs in sources:
            for i, doc in enumerate(docs):
                count += 1
                for err in object_errors(doc, kube_version):
                    bad += 1
                    kind = doc.get("kind", "?") if isinstance(doc, dict) else "?"
                    typer.echo(f"{src}: document {i + 1} ({kind}): {err}", err=True)
        typer.echo(f"{count} document(s) from {len(files)} file(s) and {len(charts)} rendered chart(s), "
                   f"{bad} error(s)")
        if bad:
            raise typer.Exit(1)

    @k8s.command("extender")
    def extender(
        host: str = typer.Option("127.0.0.1", help="Address to listen on (0.0.0.0 in a pod)."),
        port: int = typer.Option(8888, help="Port to listen on."),
        policy: str = typer.Option("best-fit", help="Placement policy (see `seedancectl policies`)."),
        seed: int = typer.Option(0, help="Seed of policies that draw random numbers."),
        task_types_trace: Path | None = typer.Option(
            None, help="Alibaba pod trace (CSV) whose task types FGD-family policies are given."),
        nodes: Path | None = typer.Option(
            None, help="Serve a fixed NodeList (JSON or YAML) without an API server; bind is disabled."),
        kubeconfig: str | None = typer.Option(None, help="kubeconfig (default: in-cluster, then $KUBECONFIG)."),
        profile: Path | None = typer.Option(
            None, help="A `kind: SchedulingProfile` YAML (docs/profiles.md); its placement policy and options "
                       "replace --policy."),
    ) -> None:
        """Run the kube-scheduler extender (filter, prioritize, bind) until interrupted."""
        import logging

        from seedance.core.errors import InputError
        from seedance.core.yamldoc import compose, line_of
        from seedance.k8s.extender import Extender
        from seedance.k8s.server import ExtenderApp, make_server
        from seedance.scheduling import PolicyContext, make_policy

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        task_types = None
        if task_types_trace is not None:
            from seedance.scheduling.tasktypes import TaskTypes
            from seedance.traces.alibaba import load_pods

            task_types = TaskTypes.from_trace(load_pods(task_types_trace))
        cfg = None
        options: dict[str, object] = {}
        if profile is not None:
            from seedance.profile import load_profile

            cfg = load_profile(profile)
            policy, options = cfg.placement.policy, dict(cfg.placement.options)
        try:
            pol = make_policy(policy, PolicyContext(seed=seed, task_types=task_types, options=options))
        except ValueError as exc:
            raise InputError(str(exc), field="--policy") from None
        if nodes is not None:
            try:
                text = nodes.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise InputError(f"cannot read nodes: {exc}", source=str(nodes)) from None
            node, doc = compose(text, source=str(nodes), what="node list")
            items = doc.get("items", []) if isinstance(doc, dict) else doc
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                field = "items" if isinstance(doc, dict) else None
                raise InputError("a node list is a NodeList (items: [...]) or a list of Node objects",
                                 source=str(nodes), line=line_of(node, ("items",)), field=field)
            ext = Extender(pol, profile=cfg)
            ext.set_nodes(items)
            ext.synced = True
        else:
            from seedance.k8s.informer import Informer
            from seedance.k8s.kubeapi import KubernetesApi

            api = KubernetesApi.from_environment(kubeconfig)
            ext = Extender(pol, binder=api, pod_lookup=api.get_pod, profile=cfg)
            Informer(ext, api).start()
        server = make_server(ExtenderApp(ext), host, port)
        typer.echo(f"seedance extender ({pol.name}) on http://{host}:{server.server_address[1]}")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()

    @k8s.command("operator")
    def operator(
        scheduler_name: str = typer.Option("seedance-scheduler", help="spec.schedulerName of created pods."),
        liveness_port: int | None = typer.Option(None, help="Serve kopf's liveness probe on this port."),
        namespace: list[str] = typer.Option([], "--namespace", "-n", help="Watch only these namespaces."),
        kubeconfig: str | None = typer.Option(None, help="kubeconfig (default: in-cluster, then $KUBECONFIG)."),
    ) -> None:
        """Run the TrainingJob operator (kopf) until interrupted."""
        import logging

        from seedance.k8s.controller import run
        from seedance.k8s.kubeapi import KubernetesApi
        from seedance.k8s.trainingjob import OperatorSettings

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        api = KubernetesApi.from_environment(kubeconfig)
        run(api, OperatorSettings(scheduler_name=scheduler_name), liveness_port=liveness_port,
            namespaces=tuple(namespace))
