"""The chart renderer's own process: vl-convert, away from bat's.

vl-convert runs a JavaScript engine (V8, inside Deno) in the process that calls it. At
start-up V8 reserves a large range of address space; under ``ulimit -v`` (4 or 16 GB,
as a CI runner or a shared machine sets) that reservation fails and V8 ends its process
with SIGTRAP: no exception, no message. In bat's own process that killed ``eval.run``
at its chart stage, before the report, the exports and the gates. Here it kills only
this child; :func:`bat.evaluation.present.plot.render.render` sees the death, skips the
charts with a warning and the chain goes on.

Protocol: requests on stdin, one JSON document per line (``{"vl_version", "scale",
"threads", "charts": [{"name", "spec"}]}``); for each, on stdout one JSON line per chart
as it is drawn, ``{"name", "svg", "png"}`` (PNG in base64) or ``{"name", "error"}`` (the
converter's first line), then :data:`DONE`. The process serves requests until stdin
ends, so one renderer (and its warm JavaScript engine) serves every plot of the bat that
started it; stdin ends when that bat closes it or dies.
"""

from __future__ import annotations

import base64
import contextlib
import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def draw(vlc: Any, spec: dict, vl_version: str | None, scale: float) -> dict:
    """SVG and PNG (base64) of one spec, or the converter's error in one line."""
    try:
        svg = vlc.vegalite_to_svg(spec, vl_version=vl_version, allowed_base_urls=[])
        png = vlc.svg_to_png(svg, scale=scale)
    except Exception as exc:  # the converter raises plain ValueError/RuntimeError
        return {"error": first_line(exc)}
    return {"svg": svg, "png": base64.b64encode(png).decode("ascii")}


def first_line(error: Exception) -> str:
    """The converter's reason without the JavaScript stack after it."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    first = lines[0] if lines else type(error).__name__
    if first.endswith(":") and len(lines) > 1:  # "conversion failed:" then the reason
        first += " " + lines[1]
    return first[:2000]


def no_core_dump() -> None:
    """No core file of this process: V8's SIGTRAP would dump one (as large as what it
    had mapped) into the current folder, the user's, where ``core_pattern`` is ``core``
    and ``ulimit -c`` allows it."""
    try:
        import resource
    except ImportError:  # not on this system: nor are its core files
        return
    with contextlib.suppress(ValueError, OSError):
        hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))


DONE = b'{"done": true}\n'  # the last line of each request's answers


def main() -> int:
    no_core_dump()
    for line in sys.stdin.buffer:
        serve(json.loads(line))
        sys.stdout.buffer.write(DONE)
        sys.stdout.flush()
    return 0


def serve(request: dict) -> None:
    """Draw every chart of one request, answering each as soon as it is drawn."""
    import vl_convert as vlc

    wanted = request.get("vl_version")
    version = wanted if wanted in vlc.get_vegalite_versions() else None
    scale = float(request.get("scale", 2.0))
    charts = request["charts"]
    lock = threading.Lock()

    def one(chart: dict) -> None:
        answer = {"name": chart["name"], **draw(vlc, chart["spec"], version, scale)}
        line = json.dumps(answer) + "\n"
        with lock:  # whole lines, each flushed: a later death keeps what was drawn
            sys.stdout.write(line)
            sys.stdout.flush()

    workers = max(1, min(int(request.get("threads") or 1), len(charts) or 1))
    with ThreadPoolExecutor(workers, thread_name_prefix="bat-render") as pool:
        list(pool.map(one, charts))


if __name__ == "__main__":
    sys.exit(main())
