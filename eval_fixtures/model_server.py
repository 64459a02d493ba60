"""The scripted model server, under the name the tests and the demo use.

It lives in bat itself (``bat.evaluation.run.scripted_model``), so that an installed bat can
serve it to an agent whose eval.yaml names a ``script`` for a model; this module only
keeps ``python -m eval_fixtures.model_server`` working.
"""

from bat.evaluation.inputs.model_script import Rule, Rules
from bat.evaluation.run.scripted_model import build_app, main

__all__ = ["Rule", "Rules", "build_app", "main"]

if __name__ == "__main__":
    main()
