#!/usr/bin/env python3
"""The far end of the trace pipeline: an OTLP/HTTP protobuf receiver that writes every span it
gets as one JSON line (trace, id, parent, name, status, attributes). The suite points the real
collector (rotel) here, so the spans checked are the ones the collector forwarded.

Usage: span_sink.py --port 9200 --out spans.jsonl
Needs opentelemetry-proto (bridge/tests/requirements-otel.txt).
"""
import argparse
import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as traces


def value(v):
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind in ("string_value", "int_value", "bool_value", "double_value") else kind


class Handler(BaseHTTPRequestHandler):
    lock = threading.Lock()

    def log_message(self, *_):
        pass

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.headers.get("content-encoding") == "gzip":
            raw = gzip.decompress(raw)
        rows = []
        if self.path.endswith("/v1/traces"):
            req = traces.ExportTraceServiceRequest.FromString(raw)
            for rs in req.resource_spans:
                res = {a.key: value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        rows.append({
                            "trace": s.trace_id.hex(), "id": s.span_id.hex(), "parent": s.parent_span_id.hex(),
                            "name": s.name, "status": s.status.code, "service": res.get("service.name"),
                            "attrs": {a.key: value(a.value) for a in s.attributes},
                        })
        with self.lock, open(ARGS.out, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--out", required=True)
    ARGS = ap.parse_args()
    ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler).serve_forever()
