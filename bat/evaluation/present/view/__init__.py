"""``bat eval.view``: the run folders of an output folder, in the browser, live.

It only reads: every file comes through the log layer's readers
(:mod:`bat.evaluation.log`), and nothing is ever written into a run folder. The modules
import one another in one direction only::

    pages   what each page shows, read from the run folders (no web library)
    watch   the episodes of a run in the order they were found, for the live stream
    app     the Starlette application: routes, token, Content-Security-Policy, SSE
    server  the listening socket and uvicorn: ``eval.view``, and ``eval.run --view``
            (:func:`server.serve_beside`, a thread of the run's process)

Starlette, sse-starlette and Jinja2 are imported by ``app`` only, and ``app`` is imported
inside the task body, so ``bat --help`` never loads them.
"""
