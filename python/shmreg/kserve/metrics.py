"""The registry's counters for Prometheus, under the C server's names."""
from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

import shmreg

from .status import error_response, http_status

# The C server's names (server/src/http/metrics.c): (name, kind, help, Stats field).
_REGISTRY_METRICS = (
    ("shmreg_regions", "gauge", "Regions listed by status: registered or pending.", "regions"),
    ("shmreg_pending_regions", "gauge",
     "Regions unregistered under the defer policy that requests still hold.", "pending_regions"),
    ("shmreg_detached_regions", "gauge",
     "Regions unregistered under the detach policy, still mapped for references held.",
     "detached_regions"),
    ("shmreg_references", "gauge", "References requests hold on listed regions.", "references"),
    ("shmreg_mapped_regions", "gauge", "Regions still mapped: listed and detached.",
     "mapped_regions"),
    ("shmreg_mapped_bytes", "gauge",
     "Bytes mapped, cached and waiting for reclaim included.", "mapped_bytes"),
    ("shmreg_pinned_bytes", "gauge", "Bytes page-locked, cached included.", "pinned_bytes"),
    ("shmreg_registrations_total", "counter", "Successful registrations.", "registrations"),
    ("shmreg_registration_refusals_total", "counter", "Registrations refused, for any reason.",
     "refusals"),
    ("shmreg_reclaim_waiting_bytes", "gauge",
     "Bytes of released regions the reclaim thread has yet to unmap.", "reclaim_waiting_bytes"),
    ("shmreg_cached_bytes", "gauge",
     "Bytes of mappings the registration cache keeps with no region on them.", "cached_bytes"),
    ("shmreg_cached_mappings", "gauge", "Mappings the registration cache keeps.",
     "cached_mappings"),
    ("shmreg_cache_hits_total", "counter", "Registrations that reused a cached or live mapping.",
     "cache_hits"),
    ("shmreg_cache_misses_total", "counter",
     "Registrations of a cacheable source that opened a new mapping.", "cache_misses"),
    ("shmreg_cache_evictions_total", "counter",
     "Cached mappings unmapped for cache_bytes, for room, or by trim.", "cache_evictions"),
)


class RegistryCollector:
    """A prometheus_client collector of ``registry``'s counters under the C
    server's names: one Registry.stats() snapshot a scrape, so the counters
    of one page agree with each other. ``metrics_router`` serves it; a server
    that already has a /metrics page of prometheus_client's default registry
    (KServe's ModelServer) adds it there instead:
    ``prometheus_client.REGISTRY.register(RegistryCollector(registry))``."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def collect(self) -> Any:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
        stats = self.registry.stats()
        for name, kind, help_text, field_name in _REGISTRY_METRICS:
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, help_text, value=getattr(stats, field_name))


def metrics_router(registry: Any, *, path: str = "/metrics", **router_options: Any) -> APIRouter:
    """An APIRouter serving ``GET /metrics`` (Prometheus text format) with
    ``registry``'s counters under the C server's ``shmreg_*`` names:
    ``shmreg_regions``, ``shmreg_mapped_bytes``, ``shmreg_registrations_total``,
    ... (docs/python.md lists them). Needs ``prometheus_client``. The page is
    made from its own ``CollectorRegistry``, so a server that already exports
    prometheus_client's default registry keeps its own ``/metrics`` apart
    (mount this one under another ``path``, or register a
    ``RegistryCollector`` in that registry)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    collectors = CollectorRegistry(auto_describe=False)
    collectors.register(RegistryCollector(registry))
    router = APIRouter(**router_options)

    def metrics() -> Response:
        try:
            page = generate_latest(collectors)
        except shmreg.Error as e:  # a closed registry
            return error_response(http_status(e), str(e))
        return Response(page, media_type=CONTENT_TYPE_LATEST)

    router.add_api_route(path, metrics, methods=["GET"])
    return router
