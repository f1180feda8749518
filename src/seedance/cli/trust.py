"""``seedancectl trust``: verify an attestation token, and grade the isolation of running GPU shares.

``trust verify`` runs the same verifier as the node-attestation registry on one token, with the
service's JWKS from its URL or a pinned file: exit 0 verified, 1 rejected (the reason on stdout),
2 bad input. ``trust grades`` computes the isolation grade of every share in a YAML/JSON list
(``shares: [{job, tenant, node, gpu, backend, gi, ci, mps_limited}]``) per job, node and tenant.
"""

from __future__ import annotations

import json
import time
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from seedance.cli.common import dumps, emit
from seedance.core.errors import InputError


class Output(StrEnum):
    """Output formats."""

    table = "table"
    json = "json"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", source=str(path)) from exc


def register(app: typer.Typer) -> None:
    """Add the ``trust`` command group."""
    trust = typer.Typer(help="Trust: attestation tokens and isolation grades.", no_args_is_help=True)
    app.add_typer(trust, name="trust")

    @trust.command("verify")
    def verify(
        token: Annotated[Path, typer.Option(help="File holding the attestation JWT.")],
        service: Annotated[str, typer.Option(help="'maa=https://<instance>.<region>.attest.azure.net' or 'intel'.")],
        jwks: Annotated[Path | None, typer.Option(help="Pinned JWKS file (default: the service's /certs).")] = None,
        jwks_url: Annotated[str | None, typer.Option(help="JWKS URL (default: the service's /certs).")] = None,
        audience: Annotated[str | None, typer.Option(help="Required 'aud' member.")] = None,
        measurement: Annotated[
            list[str] | None, typer.Option(help="Allowed launch measurement, hex (repeatable; default: any).")
        ] = None,
        nonce: Annotated[str | None, typer.Option(help="The nonce the node was given (required).")] = None,
        node: Annotated[str, typer.Option(help="Node the nonce was issued to.")] = "node",
        tee: Annotated[str | None, typer.Option(help="TEE the node advertises: sev-snp, tdx, sgx.")] = None,
        at: Annotated[float | None, typer.Option(help="Verify at this Unix time (default: now).")] = None,
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
    ) -> None:
        """Verify one attestation token (exit 1 when it is rejected)."""
        from seedance.trust.attestation import (
            AttestationRejected,
            AttestationVerifier,
            JwksUrl,
            KeySource,
            NonceStore,
            PinnedJwks,
            TeeKind,
            intel_trust_authority_service,
            maa_service,
        )

        if nonce is None:
            raise InputError(
                "give the nonce the node was handed (--nonce); a token without one is never admitted", source="--nonce"
            )
        keys: KeySource | None = None
        if jwks is not None:
            try:
                keys = PinnedJwks(json.loads(_read(jwks)), source=str(jwks))
            except json.JSONDecodeError as exc:
                raise InputError(f"not JSON: {exc.msg}", source=str(jwks), line=exc.lineno) from exc
        elif jwks_url is not None:
            keys = JwksUrl(jwks_url)
        kind, _, url = service.partition("=")
        if kind == "maa" and url:
            svc = maa_service("maa", url, keys, audience=audience)
        elif kind == "intel" and not url:
            svc = intel_trust_authority_service(keys, audience=audience)
        else:
            raise InputError(f"expected 'maa=URL' or 'intel', got {service!r}", source="--service")
        try:
            advertised = TeeKind(tee) if tee else None
        except ValueError as exc:
            raise InputError(
                f"unknown TEE {tee!r}; valid: {', '.join(k.value for k in TeeKind)}", source="--tee"
            ) from exc
        now = time.time() if at is None else at
        nonces = NonceStore()
        nonces.adopt(nonce, node, now)
        verifier = AttestationVerifier([svc], nonces)
        text = _read(token).strip()
        try:
            rec = verifier.verify(text, node=node, now=now, advertised=advertised, allowed_measurements=measurement)
        except AttestationRejected as exc:
            doc: dict[str, Any] = {"verified": False, "reason": exc.reason.value, "message": exc.message}
            emit(dumps(doc) if output is Output.json else f"rejected ({exc.reason.value}): {exc.message}")
            raise typer.Exit(1) from None
        doc = {"verified": True, **rec.to_json()}
        if output is Output.json:
            emit(dumps(doc))
        else:
            table = Table(title="attestation verified")
            table.add_column("field")
            table.add_column("value", overflow="fold")
            for k, v in doc.items():
                table.add_row(k, str(v))
            emit(table)

    @trust.command("grades")
    def grades(
        from_: Annotated[Path, typer.Option("--from", help="YAML/JSON with a 'shares' list of running GPU shares.")],
        output: Annotated[Output, typer.Option("-o", "--output", help="Output format.")] = Output.table,
    ) -> None:
        """Isolation grade of every share, and the weakest per node and per tenant."""
        from seedance.core import yamldoc
        from seedance.core.resources import SliceBackend
        from seedance.trust.grades import SliceShare, grade_shares

        doc = yamldoc.compose(_read(from_), source=str(from_), what="share list", allow_empty=True)[1]
        if not isinstance(doc, dict) or not isinstance(doc.get("shares"), list):
            raise InputError("expected a 'shares' list", source=str(from_), field="shares")
        shares = []
        for i, s in enumerate(doc["shares"]):
            where = f"shares[{i}]"
            if not isinstance(s, dict):
                raise InputError("each share is a mapping", source=str(from_), field=where)
            try:
                shares.append(
                    SliceShare(
                        job=str(s["job"]),
                        tenant=str(s["tenant"]),
                        node=str(s["node"]),
                        gpu=int(s.get("gpu", 0)),
                        backend=SliceBackend(str(s["backend"])),
                        gi=s.get("gi"),
                        ci=s.get("ci"),
                        mps_limited=bool(s.get("mps_limited", False)),
                    )
                )
            except KeyError as exc:
                raise InputError(f"missing {exc.args[0]!r}", source=str(from_), field=where) from exc
            except ValueError as exc:
                raise InputError(str(exc), source=str(from_), field=where) from exc
        report = grade_shares(shares)
        if output is Output.json:
            emit(dumps(report.to_json()))
            return
        table = Table(title="isolation grade per running share (weakest against another tenant on the same GPU)")
        for col in ("job", "tenant", "node", "gpu", "backend", "grade", "reason"):
            table.add_column(col)
        for j in report.jobs:
            table.add_row(j.job, j.tenant, j.node, str(j.gpu), j.backend, j.grade.label, j.reason)
        emit(table)
        emit(
            "per node: "
            + ", ".join(f"{k} {v.label}" for k, v in report.nodes.items())
            + "; per tenant: "
            + ", ".join(f"{k} {v.label}" for k, v in report.tenants.items())
        )
