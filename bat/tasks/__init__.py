"""bat's command tree as Invoke collections: ``ns`` is what the ``bat`` program runs.

Each branch of the tree is a module ending in ``ns = Collection(...)`` (plus its
``ns.configure`` defaults), so another project can mount any of them in its own
``tasks.py``::

    from invoke import Collection
    from bat.tasks import init, set as set_tasks

    ns = Collection(init.ns, set_tasks.ns)

Task modules are thin: they read flags and configuration, call the library, print.
They import nothing heavy at module level, so listing commands stays fast.
"""

from invoke import Collection

from bat.tasks import add, agents, doctor, images, init, version
from bat.tasks import eval as eval_
from bat.tasks import set as set_

ns = Collection()
ns.add_collection(init.ns)
ns.add_collection(add.ns)
ns.add_collection(set_.ns)
ns.add_collection(eval_.ns)
ns.add_task(version.version)
ns.add_task(images.build)
ns.add_task(images.push)
ns.add_task(doctor.doctor)
ns.add_task(agents.agents)
# Every group's defaults at the root too: Invoke gives a pre/post task (eval.run's judge,
# summarize, plot) only the root's configuration, and reads a BAT_* variable only for a
# key the configuration has. With all of them here every task sees
# every setting with its type, and every command checks every BAT_* variable, so a bad
# one is found at once (bat.cli.config), not by the one command that reads it.
for _group in (init.ns, eval_.ns, images.ns):
    ns.configure(_group.configuration())

__all__ = ["add", "agents", "doctor", "eval_", "images", "init", "ns", "set_", "version"]
