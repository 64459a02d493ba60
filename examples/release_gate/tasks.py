"""A release gate: build the image, evaluate that very image, refuse to ship below a pass
rate, then push it.

An example of composing bat's collections in a project's own ``tasks.py``. Copy it to
an agent's folder (one with ``eval/eval.yaml``, a ``Dockerfile`` and a registry in its
``.env``) and run ``invoke release`` there. The chain, all plain Invoke:

1. ``images.build`` (a ``pre`` task) builds ``{registry}/{repo}:{version}``;
2. ``eval.run`` (a ``pre`` task; it chains ``eval.judge``, ``eval.summarize``, ``eval.plot``)
   evaluates the agent started from that image (``eval.image: true`` below: the image
   ``bat build`` tags, as ``eval.run --image``), and records its run directory in the
   command line's run context (``eval_tasks.context(c).run_dir``);
3. ``release`` reads that run's ``summary.json`` of every model and stops the chain with
   exit status 1 if a model's pass rate is below the threshold;
4. ``images.push`` (a ``post`` task) pushes the image evaluated; it runs only if the gate
   passed, and does not build again (it was built on this command line).

bat's collections keep their defaults (``Collection.configure`` below copies them to the
root collection, because Invoke hands ``pre``/``post`` tasks the root's configuration),
and this project configures them and itself the same way.
"""

import json

from invoke import Collection, Exit, task

from bat.tasks import eval as eval_tasks
from bat.tasks import images


@task(
    pre=[images.build, eval_tasks.run],
    post=[images.push],
    help={"threshold": "Lowest pass rate (0-1) a model may have for the release to go on."},
)
def release(c, threshold=None):
    """Build the image, evaluate it, gate on its pass rate, then push it."""
    limit = float(threshold if threshold is not None else c.config.release.threshold)
    run_dir = eval_tasks.context(c).run_dir
    run = json.loads((run_dir / "run.json").read_text())
    worst = None
    for model in run["models"]:
        totals = json.loads((run_dir / model["dir"] / "summary.json").read_text())["totals"]
        rate = totals["passed"] / totals["attempts"] if totals["attempts"] else 0.0
        print(f"release gate: {model['label']}: {totals['passed']}/{totals['attempts']} passed")
        worst = rate if worst is None else min(worst, rate)
    if worst is None or worst < limit:
        shown = "no episodes" if worst is None else f"a pass rate of {worst:.0%}"
        raise Exit(
            f"release gate: {shown} is below {limit:.0%} ({run_dir.name}); not pushing",
            code=1,
        )
    print(f"release gate: pass rate {worst:.0%} >= {limit:.0%}: pushing the image evaluated")


ns = Collection(release, eval_tasks.ns, images.ns)
ns.configure(eval_tasks.ns.configuration())
ns.configure(images.ns.configuration())
ns.configure(
    {
        "release": {"threshold": 0.9},
        # The image is built from this folder; its registry and repository come from
        # the .env (BAT_DOCKER_REGISTRY, BAT_DOCKER_REPO) unless set here or in the shell.
        "images": {"context": "."},
        # eval.run starts the agent from the image just built, not from its source.
        "eval": {"image": True},
    }
)
