"""bat-adk's ``local`` telemetry output, imitated: spans appended to a JSON-lines file.

Why: the evaluation engine reads tool calls and token usage from the span file an agent
writes when its config.yaml says so. The tool agent writes the same file without
OpenTelemetry: one JSON object per line, in the format of bat-adk's JsonFileSpanExporter
(``name``, ``kind``, ``trace_id``, ``span_id``, ``parent_span_id``, ``start_time`` and
``end_time`` in unix ns, ``attributes``, ``status``, ``status_description``, ``events``),
redacted as bat-adk's RedactingSpanExporter does at the configured privacy level:

* ``content`` (1): ``input.value``, ``output.value``, ``exception.message`` and
  ``exception.stacktrace`` (in span and event attributes) and a status description
  become ``__BLOCKED__``;
* ``names`` (2): also every span name becomes its ``openinference.span.kind`` (or
  ``__BLOCKED__`` when it has none);
* ``full`` (3): also ``tool.name``. Token counts, kinds, ids and times always survive.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any

import yaml

REDACTED = "__BLOCKED__"  # the sentinel bat-adk's RedactingSpanExporter writes
PRIVACY = {"none": 0, "content": 1, "names": 2, "full": 3}
CONTENT_KEYS = ("input.value", "output.value", "exception.message", "exception.stacktrace")
DEFAULT_FILE = "spans.jsonl"  # bat-adk's default file_path
TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}")

Span = dict[str, Any]


def parse_privacy(value: Any) -> int:
    """A privacy level by name (any case) or ordinal; unset is ``none``, a typo an error."""
    if value is None:
        return 0
    if isinstance(value, str) and value.strip().lower() in PRIVACY:
        return PRIVACY[value.strip().lower()]
    if type(value) is int and value in PRIVACY.values():
        return value
    raise ValueError(f"unknown telemetry privacy level {value!r}")


def new_span(
    name: str, trace_id: str, parent: str | None, times: tuple[int, int], **attributes: Any
) -> Span:
    """A finished span as bat-adk's file exporter writes it (status UNSET, no events)."""
    return {
        "name": name,
        "kind": "INTERNAL",
        "trace_id": trace_id,
        "span_id": secrets.token_hex(8),
        "parent_span_id": parent,
        "start_time": times[0],
        "end_time": times[1],
        "attributes": attributes,
        "status": "UNSET",
        "status_description": None,
        "events": [],
    }


def trace_parent(metadata: dict[str, Any]) -> tuple[str, str | None]:
    """The trace id and parent span id of a W3C ``traceparent`` a calling agent put in the
    message metadata (as bat-adk's CallAgentNode does), else a new trace without parent."""
    found = TRACEPARENT.fullmatch(str(metadata.get("traceparent") or ""))
    return (found[1], found[2]) if found else (secrets.token_hex(16), None)


class SpanFile:
    """The ``local`` outputs of config.yaml's ``telemetry``, opened (appending) at start-up."""

    def __init__(self, paths: list[Path], privacy: int) -> None:
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
        self.files = [path.open("a", encoding="utf-8") for path in paths]
        self.privacy = privacy

    @classmethod
    def from_config(cls, path: Path) -> SpanFile | None:
        """The span file(s) config.yaml names; None without the file or a local output.

        A relative ``file_path`` is relative to the working directory, as for bat-adk.
        Raises OSError, or ValueError for a config that is not what bat-adk accepts.
        """
        if not path.is_file():
            return None
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            telemetry = data.get("telemetry") or {}
            outputs = telemetry.get("output") or []
            outputs = [o for o in outputs if o.get("type") == "local"]
        except (yaml.YAMLError, AttributeError) as exc:
            raise ValueError(f"not a valid config: {exc}") from None
        if not outputs:
            return None
        privacy = parse_privacy(telemetry.get("privacy"))
        paths = [Path(o.get("file_path") or DEFAULT_FILE).absolute() for o in outputs]
        return cls(paths, privacy)

    def redact(self, span: Span) -> Span:
        """What bat-adk's RedactingSpanExporter leaves of ``span`` (a copy)."""
        span = json.loads(json.dumps(span))
        if self.privacy >= PRIVACY["content"]:
            hidden = CONTENT_KEYS + (("tool.name",) if self.privacy >= PRIVACY["full"] else ())
            for holder in [span, *span["events"]]:
                attributes = holder["attributes"]
                holder["attributes"] = {
                    k: REDACTED if k in hidden else attributes[k] for k in attributes
                }
            if span["status_description"]:
                span["status_description"] = REDACTED
        if self.privacy >= PRIVACY["names"]:
            span["name"] = span["attributes"].get("openinference.span.kind", REDACTED)
        return span

    def write(self, spans: list[Span]) -> None:
        """Append ``spans``, one line each, flushed at once (no reader sees half a line)."""
        for file in self.files:
            for span in spans:
                file.write(json.dumps(self.redact(span)) + "\n")
                file.flush()
