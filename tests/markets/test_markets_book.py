"""The capacity-market catalog (shared price files) and user price books, with every error located."""

from __future__ import annotations

from pathlib import Path

import pytest

from seedance.cli.main import main
from seedance.core.errors import InputError, UnknownNameError
from seedance.markets.book import band_rate, load_catalog, load_price_book, market_book

BOOK = """apiVersion: seedance.io/v1
kind: PriceBook
metadata: {name: contract}
offers:
  - cloud: aws
    instance_type: p4d.24xlarge
    region: us-east-1
    on_demand_usd_per_hour: 21.957642
    commitments: {1y: 14.0, 3y: 9.0}
    source: EDP contract 2026-05
    date: "2026-05-01"
  - cloud: onprem
    instance_type: dgx-a100
    region: dc1
    gpu_model: A100-80GB
    gpu_count: 8
    on_demand_usd_per_hour: 12.0
    spot_interruption_band: "<5%"
    source: amortised purchase
"""


def test_the_catalog_has_three_clouds_with_sources_and_dates(shared_data: Path) -> None:
    book = load_catalog()
    assert len(book) == 52 and {o.cloud for o in book} == {"aws", "gcp", "azure"}
    p4d = book.find(cloud="aws", instance_type="p4d.24xlarge", region="us-east-1")
    assert (p4d.gpu_model, p4d.gpu_count, p4d.on_demand, p4d.spot) == ("A100-40GB", 8, 21.957642, 2.4655)
    assert p4d.interruption_band == "10-15%" and p4d.spot_interruption_per_month == pytest.approx(0.125)
    assert "karpenter-provider-aws" in p4d.sources["on_demand"] and p4d.dates["interruption"].startswith("2025-06-28")
    a2 = book.find(cloud="gcp", instance_type="a2-highgpu-1g", region="us-central1")
    assert a2.commitments == {"1y": 2.314207, "3y": 1.285708} and "Cyclenerd" in a2.sources["commitments"]
    prices = a2.reservation_prices()
    assert prices.on_demand == pytest.approx(3.673385) and prices.discount("3y") == pytest.approx(0.65, abs=1e-3)
    nd = book.find(cloud="azure", instance_type="Standard_ND96isr_H100_v5", region="eastus")
    assert nd.on_demand == 98.32 and nd.spot is None and nd.commitments == {}  # not found in public sources: absent
    p5 = book.find(cloud="aws", instance_type="p5.48xlarge", region="us-east-1")
    assert p5.interruption_band == ">20%" and p5.spot_interruption_lower_bound
    with pytest.raises(UnknownNameError, match="no offer aws/p9/us-east-1; known: "):
        book.find(cloud="aws", instance_type="p9", region="us-east-1")
    assert band_rate("5-10%") == (pytest.approx(0.075), False) and band_rate(">20%") == (0.2, True)


def test_a_price_book_overrides_and_adds_offers(shared_data: Path, tmp_path: Path) -> None:
    p = tmp_path / "book.yaml"
    p.write_text(BOOK)
    book = market_book(p)
    p4d = book.find(cloud="aws", instance_type="p4d.24xlarge", region="us-east-1")
    assert p4d.commitments == {"1y": 14.0, "3y": 9.0} and p4d.spot == 2.4655  # kept from the catalog
    assert p4d.sources["commitments"].endswith("EDP contract 2026-05") and "karpenter" in p4d.sources["spot"]
    dgx = book.find(cloud="onprem", instance_type="dgx-a100", region="dc1")
    assert dgx.gpu_model == "A100-80GB" and dgx.spot_interruption_per_month == pytest.approx(0.025)
    assert len(book) == 53


@pytest.mark.parametrize(("edit", "line", "field", "msg"), [
    (("on_demand_usd_per_hour: 21.957642", "on_demand_usd_per_hour: -1"), 8, "offers.0.on_demand_usd_per_hour",
     "greater than 0"),
    (("commitments: {1y: 14.0, 3y: 9.0}", "commitments: {1y: 14.0, 2y: 9.0}"), 9, "offers.0.commitments.2y", ""),
    (("commitments: {1y: 14.0, 3y: 9.0}", "commitments: {1y: 30.0}"), 9, "offers.0.commitments.1y",
     "not below on-demand"),
    (("    source: EDP contract 2026-05\n", ""), 5, "offers.0.source", "Field required"),
    (("gpu_model: A100-80GB", "gpu_model: B300"), 15, "offers.1.gpu_model", "unknown GPU model 'B300'"),
    (("    gpu_model: A100-80GB\n", ""), 12, "offers.1.gpu_model", "required for an offer the catalog does not have"),
    (('spot_interruption_band: "<5%"', 'spot_interruption_band: "rare"'), 18, "offers.1.spot_interruption_band",
     "unknown band"),
    (("    date:", "    dates:"), 11, "offers.0.dates", "unknown key"),
])
def test_bad_price_books_name_line_and_field(shared_data: Path, tmp_path: Path, edit: tuple[str, str], line: int,
                                             field: str, msg: str) -> None:
    p = tmp_path / "book.yaml"
    p.write_text(BOOK.replace(*edit))
    with pytest.raises(InputError) as ei:
        load_price_book(p, base=load_catalog())
    assert (ei.value.source, ei.value.line, ei.value.field) == (str(p), line, field)
    assert msg in ei.value.message


def test_bad_catalog_files_and_the_cli(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head = ("cloud,instance_type,gpu_model,gpu_count,gpu_memory_gib,vcpus,memory_gib,region,on_demand_usd_per_hour,"
            "spot_usd_per_hour,source,data_date\n")
    bad = tmp_path / "instances.csv"
    bad.write_text(head + "aws,x,A100,8,40,96,1152,us-east-1,abc,,src,2026\n")
    with pytest.raises(InputError, match=r"instances.csv:2: field on_demand_usd_per_hour: not a number"):
        load_catalog(instances=bad)
    bad.write_text(head.replace("spot_usd_per_hour,", "") + "aws,x,A100,8,40,96,1152,us-east-1,1.0,src,2026\n")
    with pytest.raises(InputError, match=r"instances.csv:1: field spot_usd_per_hour: missing column"):
        load_catalog(instances=bad)
    book = tmp_path / "book.yaml"
    book.write_text(BOOK.replace("on_demand_usd_per_hour: 12.0", "on_demand_usd_per_hour: twelve"))
    assert main(["markets", "validate", str(book)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {book}:17: field offers.1.on_demand_usd_per_hour:")
    book.write_text(BOOK)
    assert main(["markets", "validate", str(book)]) == 0
    assert main(["markets", "list", "--cloud", "gcp", "-o", "json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert {o["cloud"] for o in out["offers"]} == {"gcp"}
