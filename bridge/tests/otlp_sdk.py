#!/usr/bin/env python3
"""Sends Codex- or VS Code-shaped OTLP telemetry with the official OpenTelemetry Python SDK.

Driven by bridge/tests/otlp_inbound.rs (`python3 otlp_sdk.py --protocol grpc ...`). Logs go
through a LoggerProvider with a BatchLogRecordProcessor and the SDK's own OTLP exporter
(gRPC or HTTP protobuf); with --span one span and with --metric one counter point are
exported too (the tee forwards traces and metrics).
Prints one JSON line: {"export_results": [...], "records": N, "spans": M}; exits 1 when an
export did not succeed.

Record shapes follow real captures: Codex (service.name codex_exec, the event name in the
`event.name` attribute, a source location in LogRecord.event_name, session = the
`conversation.id` attribute, `success` as the string "true"); VS Code (service.name
copilot-chat, session = the resource `session.id`, the event name in LogRecord.event_name).
"""

import argparse
import json
import sys

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter
from opentelemetry.sdk.resources import Resource


def codex_records(session):
    common = {"conversation.id": session, "app.version": "0.171.0", "originator": "codex_exec",
              "model": "gpt-5", "slug": "gpt-5", "terminal.type": "unknown"}
    src = "event otel/src/events/session_telemetry.rs:737"
    return [
        (src, dict(common, **{"event.name": "codex.conversation_starts", "provider_name": "openai",
                              "approval_policy": "never", "sandbox_policy": "read-only"})),
        (src, dict(common, **{"event.name": "codex.user_prompt", "prompt_length": 7, "prompt": "[REDACTED]"})),
        (src, dict(common, **{"event.name": "codex.tool_decision", "tool_name": "shell", "call_id": "call_1",
                              "decision": "approved", "source": "config"})),
        ("event otel/src/tool_result.rs:54",
         dict(common, **{"event.name": "codex.tool_result", "tool_name": "shell", "call_id": "call_1",
                         "arguments": "{\"command\":[\"ls\"]}", "duration_ms": 12, "success": "true",
                         "output": "Cargo.toml\n"})),
        (src, dict(common, **{"event.name": "codex.sse_event", "event.kind": "response.completed",
                              "input_token_count": 120, "output_token_count": 30})),
    ]


def vscode_records(session):
    return [
        ("copilot_chat.session.start", {"gen_ai.request.model": "gpt-4o", "gen_ai.agent.name": "agent"}),
        ("copilot_chat.agent.turn", {"turn.index": 0, "gen_ai.usage.input_tokens": 100,
                                     "gen_ai.usage.output_tokens": 20, "tool_call_count": 1}),
        ("copilot_chat.tool.call", {"gen_ai.tool.name": "run_in_terminal", "gen_ai.tool.call.id": "tc1",
                                    "duration_ms": 40, "success": True}),
        ("copilot_chat.tool.call", {"gen_ai.tool.name": "read_file", "gen_ai.tool.call.id": "tc2",
                                    "duration_ms": 3, "success": False, "error.type": "file_not_found"}),
    ]


class Recording(LogRecordExporter):
    """Delegates to the real exporter and records each export's result."""

    def __init__(self, inner, results):
        self.inner = inner
        self.results = results

    def export(self, batch):
        r = self.inner.export(batch)
        self.results.append(getattr(r, "name", str(r)))
        return r

    def shutdown(self):
        return self.inner.shutdown()

    def force_flush(self, timeout_millis=30000):
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True,
                    help="gRPC: http://host:port; HTTP: base URL, /v1/logs is appended")
    ap.add_argument("--protocol", choices=["grpc", "http"], required=True)
    ap.add_argument("--agent", choices=["codex", "vscode"], required=True)
    ap.add_argument("--session", required=True)
    ap.add_argument("--repeat", type=int, default=1, help="send the record set this many times")
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--span", action="store_true", help="also export one span")
    ap.add_argument("--metric", action="store_true", help="also export one counter data point")
    a = ap.parse_args()

    if a.agent == "codex":
        resource = Resource.create({"service.name": "codex_exec", "service.version": "0.171.0",
                                    "host.name": "sdk-host"})
        records = codex_records(a.session)
    else:
        resource = Resource.create({"service.name": "copilot-chat", "service.version": "0.30.0",
                                    "session.id": a.session, "host.name": "sdk-host"})
        records = vscode_records(a.session)

    if a.protocol == "grpc":
        import grpc
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        comp = grpc.Compression.Gzip if a.gzip else grpc.Compression.NoCompression
        log_exp = OTLPLogExporter(endpoint=a.endpoint, insecure=True, compression=comp, timeout=10)
        span_exp = (OTLPSpanExporter(endpoint=a.endpoint, insecure=True, compression=comp, timeout=10)
                    if a.span else None)
    else:
        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        comp = Compression.Gzip if a.gzip else Compression.NoCompression
        base = a.endpoint.rstrip("/")
        log_exp = OTLPLogExporter(endpoint=base + "/v1/logs", compression=comp, timeout=10)
        span_exp = (OTLPSpanExporter(endpoint=base + "/v1/traces", compression=comp, timeout=10)
                    if a.span else None)

    results = []
    provider = LoggerProvider(resource=resource)
    provider.add_log_record_processor(BatchLogRecordProcessor(Recording(log_exp, results),
                                                              max_export_batch_size=512))
    logger = provider.get_logger("codex_otel.log_only" if a.agent == "codex" else "copilot-chat")
    n = 0
    for _ in range(a.repeat):
        for event_name, attrs in records:
            logger.emit(event_name=event_name, attributes=attrs, body=None)
            n += 1
    provider.force_flush()
    provider.shutdown()

    spans = 0
    span_results = []
    if span_exp is not None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        tp = TracerProvider(resource=resource)

        class SpanRec:
            def export(self, batch):
                r = span_exp.export(batch)
                span_results.append(r.name)
                return r

            def shutdown(self):
                span_exp.shutdown()

            def force_flush(self, timeout_millis=30000):
                return True

        tp.add_span_processor(SimpleSpanProcessor(SpanRec()))
        with tp.get_tracer("otlp_sdk").start_as_current_span("execute_tool shell") as s:
            s.set_attribute("gen_ai.operation.name", "execute_tool")
            s.set_attribute("gen_ai.conversation.id", a.session)
        spans = 1
        tp.shutdown()

    points = 0
    if a.metric:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        if a.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
            metric_exp = OTLPMetricExporter(endpoint=a.endpoint, insecure=True, compression=comp, timeout=10)
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            metric_exp = OTLPMetricExporter(endpoint=a.endpoint.rstrip("/") + "/v1/metrics", compression=comp,
                                            timeout=10)
        reader = PeriodicExportingMetricReader(metric_exp, export_interval_millis=3_600_000)
        mp = MeterProvider(resource=resource, metric_readers=[reader])
        counter = mp.get_meter("otlp_sdk").create_counter("agent.tool.calls")
        counter.add(3, {"gen_ai.tool.name": "shell"})
        if not mp.force_flush():
            span_results.append("METRICS_FAILED")
        mp.shutdown()
        points = 1

    out = {"export_results": results, "span_results": span_results, "records": n, "spans": spans,
           "points": points}
    print(json.dumps(out))
    ok = results and all(r == "SUCCESS" for r in results) and all(r == "SUCCESS" for r in span_results)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
