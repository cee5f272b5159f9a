"""OTLP receivers on loopback, decoding what the proxy exports with opentelemetry-proto.

`HttpReceiver` serves OTLP/HTTP (protobuf) on `/v1/traces` and `/v1/metrics`;
`GrpcReceiver` serves the OTLP gRPC trace and metrics services (only where grpcio is
installed). Both keep every span and metric data point they were sent, flattened into
`ReceivedSpan` and `ReceivedMetric`. `HttpReceiver.hold` makes it answer nothing until it
is set: a collector that stalls.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as metrics_pb
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as trace_pb
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

HOST = "127.0.0.1"
WAIT_S = 20.0


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    status_code: int
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope: str


@dataclass(frozen=True)
class ReceivedMetric:
    name: str
    unit: str
    attributes: dict[str, Any]
    count: int
    """The data point's count (histograms) or value (sums)."""
    total: float


@dataclass
class Received:
    """What a receiver was sent, guarded by a lock (servers write from their threads)."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    metrics: list[ReceivedMetric] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_traces(self, request: trace_pb.ExportTraceServiceRequest) -> None:
        spans = list(_spans(request))
        with self.lock:
            self.requests += 1
            self.spans.extend(spans)

    def add_metrics(self, request: metrics_pb.ExportMetricsServiceRequest) -> None:
        points = list(_metrics(request))
        with self.lock:
            self.requests += 1
            self.metrics.extend(points)

    def wait_for(self, check: Callable[[Received], bool], timeout_s: float = WAIT_S) -> None:
        """Poll until `check(self)` holds; raise if it never does (bounded)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if check(self):
                    return
            time.sleep(0.02)
        raise AssertionError(f"never received what was expected: {len(self.spans)} spans")

    def named(self, name: str) -> list[ReceivedSpan]:
        with self.lock:
            return [s for s in self.spans if s.name == name]


def _spans(request: trace_pb.ExportTraceServiceRequest) -> Iterator[ReceivedSpan]:
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield ReceivedSpan(
                    name=span.name,
                    trace_id=span.trace_id.hex(),
                    span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    kind=span.kind,
                    status_code=span.status.code,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    attributes=_attributes(span.attributes),
                    resource=resource,
                    scope=scope_spans.scope.name,
                )


def _metrics(request: metrics_pb.ExportMetricsServiceRequest) -> Iterator[ReceivedMetric]:
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                for point in getattr(metric, kind).data_points:
                    count = point.count if kind == "histogram" else int(point.as_int)
                    total = point.sum if kind == "histogram" else float(point.as_int)
                    attributes = _attributes(point.attributes)
                    yield ReceivedMetric(metric.name, metric.unit, attributes, count, total)


class HttpReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1:<free port>, in a thread."""

    def __init__(self) -> None:
        self.received = Received()
        self.hold = threading.Event()
        self.hold.set()
        """Clear it to stall every export until it is set again."""
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                receiver.hold.wait(WAIT_S)
                if self.path == "/v1/traces":
                    receiver.received.add_traces(
                        trace_pb.ExportTraceServiceRequest.FromString(body)
                    )
                    answer = trace_pb.ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    request = metrics_pb.ExportMetricsServiceRequest.FromString(body)
                    receiver.received.add_metrics(request)
                    answer = metrics_pb.ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> HttpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.hold.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(WAIT_S)


class GrpcReceiver:
    """An OTLP gRPC receiver (trace and metrics services) on 127.0.0.1:<free port>."""

    def __init__(self) -> None:
        import grpc
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        self.received = received = Received()

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
            def Export(self, request: Any, _context: Any) -> Any:
                received.add_traces(request)
                return trace_pb.ExportTraceServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):  # type: ignore[misc]
            def Export(self, request: Any, _context: Any) -> Any:
                received.add_metrics(request)
                return metrics_pb.ExportMetricsServiceResponse()

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self._server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self._server)
        self.port = self._server.add_insecure_port(f"{HOST}:0")

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __enter__(self) -> GrpcReceiver:
        self._server.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.stop(grace=None).wait(WAIT_S)
