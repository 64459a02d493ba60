"""Container images of an agent: ``bat build`` and ``bat push`` as a plain library (no Invoke).

Modules, in the order a build uses them:

* ``settings``: which image, from where: the context folder, ``{registry}/{repo}:{version}``
  resolved from flags, the shell, bat's configuration, the context's ``.env`` and
  fallbacks, each value with the place it came from;
* ``archive``: the build context as one tar archive (``.dockerignore`` applied, bat's own
  ``.bat/`` left out) and the log files under ``<context>/.bat/logs/``;
* ``display``: steps and layers as they happen: a live line on a terminal, plain lines
  elsewhere;
* ``stream``: what the Docker build and push output means (steps, failures, digests)
  and the one-line errors made from it;
* ``engine``: the local Docker engine through the docker SDK;
* ``remote``: a remote Docker host over SSH with Fabric;
* ``credentials``: a registry user and password (never printed).

docker and fabric are imported inside the functions that need them, so importing this
package costs nothing for ``bat --help``.
"""
