"""Reading a server's GET /metrics in tests: the Prometheus text parsed into samples."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families


class Scrape:
    """One scrape: ``value(name, **labels)`` sums the samples whose labels include ``labels``."""

    def __init__(self, text: str) -> None:
        self.samples: list[tuple[str, dict[str, str], float]] = [
            (sample.name, dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        ]

    def value(self, name: str, **labels: str) -> float:
        return sum(v for n, got, v in self.samples if n == name and _within(labels, got))

    def labels(self, name: str, label: str, **labels: str) -> set[str]:
        """The values ``label`` takes among the samples of ``name`` (with ``labels``)."""
        return {got.get(label, "") for n, got, _ in self.samples if n == name and _within(labels, got)}

    def names(self) -> set[str]:
        return {n for n, _, _ in self.samples}


def _within(wanted: Mapping[str, str], got: Mapping[str, str]) -> bool:
    return all(got.get(k) == v for k, v in wanted.items())


def scrape(url: str) -> Scrape:
    """GET url/metrics (no token: /metrics needs none), on a new connection each time."""
    answer = httpx.get(f"{url}/metrics", timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return Scrape(answer.text)
