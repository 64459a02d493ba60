"""Charts and the report of evaluation runs (``bat eval.plot``), reading only the run log.

Every number drawn or shown is read from the files :mod:`bat.evaluation.stats` wrote
(through :mod:`bat.evaluation.log.store`); nothing here computes a statistic. The modules
import one another in one direction only::

    runs    finding runs under a folder, their labels, --filter; a Run exposes the
            values of its summary.json and metrics.json
    specs   the Vega-Lite specs of the six charts (Altair), labels the renderer can draw
    report  report.html, from the Jinja2 template templates/report.html.j2
    render  vl-convert (SVG, PNG) and plot_folder: everything eval.plot writes

altair, vl_convert and jinja2 are imported inside the functions that use them, so
``bat --help`` never loads them.
"""
