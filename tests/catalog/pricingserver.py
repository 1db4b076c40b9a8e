"""A stand-in for AWS's Pricing API on 127.0.0.1, which moto's server does not serve.

It speaks the API's JSON protocol (``POST /`` with ``X-Amz-Target:
AWSPriceListService.GetProducts``), so that a real boto3 ``pricing`` client builds,
signs, pages and parses each call: it answers price list items of the shape AWS
returns, a page at a time, for the instance type a query's filters name.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


def price_item(instance_type: str, region: str, usd: str) -> dict[str, Any]:
    """One ``PriceList`` item as GetProducts returns it (before its JSON encoding)."""
    return {
        "product": {
            "productFamily": "Compute Instance",
            "attributes": {
                "instanceType": instance_type,
                "regionCode": region,
                "operatingSystem": "Linux",
                "tenancy": "Shared",
                "preInstalledSw": "NA",
                "capacitystatus": "Used",
            },
            "sku": f"SKU{instance_type}{region}",
        },
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                "SKU.JRHW": {
                    "priceDimensions": {
                        "SKU.JRHW.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "pricePerUnit": {"USD": usd},
                            "description": f"${usd} per On Demand Linux {instance_type} Hour",
                        }
                    }
                }
            }
        },
    }


class PricingAPI:
    """What the stand-in answers, and what it was asked.

    Attributes:
        prices: ``{instance_type: [(region, USD as text), ...]}``.
        page_size: Items per page (a ``NextToken`` leads to the next).
        error: When set, ``(HTTP status, AWS error code)`` every call answers.
        calls: The body of each GetProducts call.
    """

    def __init__(self) -> None:
        self.prices: dict[str, list[tuple[str, str]]] = {}
        self.page_size = 2
        self.error: tuple[int, str] | None = None
        self.calls: list[dict[str, Any]] = []

    def answer(self, target: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON body for one call."""
        if self.error is not None:
            status, code = self.error
            return status, {"__type": code, "message": f"{code} (stand-in)"}
        if target != "AWSPriceListService.GetProducts":
            return 400, {"__type": "UnknownOperationException", "message": target}
        self.calls.append(body)
        filters = {f["Field"]: f["Value"] for f in body.get("Filters", [])}
        items = [
            json.dumps(price_item(filters.get("instanceType", ""), region, usd))
            for region, usd in self.prices.get(filters.get("instanceType", ""), [])
        ]
        start = int(body.get("NextToken") or 0)
        reply: dict[str, Any] = {
            "FormatVersion": "aws_v1",
            "PriceList": items[start : start + self.page_size],
        }
        if start + self.page_size < len(items):
            reply["NextToken"] = str(start + self.page_size)
        return 200, reply


@pytest.fixture
def pricing_api() -> Iterator[tuple[PricingAPI, str]]:
    """A stand-in Pricing API on loopback, and its endpoint URL."""
    api = PricingAPI()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            status, reply = api.answer(self.headers.get("X-Amz-Target", ""), body)
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
