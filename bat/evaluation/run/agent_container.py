"""The agent under test started from its container image: the image you ship, evaluated.

``evaluation.agent.image`` (or ``eval.run --image``) replaces ``evaluation.agent.command``:
each replica is one container of that image on the Docker engine ``DOCKER_HOST`` names
(the local socket by default; ``tcp://`` and ``ssh://`` engines through the docker SDK).
:class:`ContainerAgent` has the interface of :class:`~bat.evaluation.run.agent_process.AgentProcess`
(``start``, ``wait_ready``, ``alive``, ``describe_exit``, ``restart``, ``close``), so the
episode runner restarts a dead replica exactly as it restarts a dead process.

How a container is run, and why:

* The host's network (``network_mode: host``), with ``PORT`` set to the replica's port
  (:func:`replica_port`: the first on ``agent_url``'s). Port publishing needs the
  engine's bridge network, which engines started with ``--bridge=none`` (CI sandboxes,
  rootless set-ups) do not have; the host's network works on every engine, and a bat-adk
  agent listens on ``PORT``. On a remote engine the agent is reached at the engine's host
  name, so its ports must be open to bat's machine.
* The environment follows the rules of an agent bat starts with ``uv run .``: the
  project's ``.env``, each of its names overridden by the shell's value if the shell has
  one (a secret exported in CI reaches the container; the rest of the shell — ``PATH``,
  ``HOME`` — is the image's business), then ``evaluation.agent.env``, the model's
  settings, ``PORT``.
* On the local engine the model's folder of the run is mounted at its own path, so the
  agent writes its spans where bat reads them (the config copy, as for a process). A
  remote engine cannot see bat's folders: its agents' spans are not read.
* With that folder mounted, the container runs as bat's own user (``uid:gid``), not as
  the image's ``USER``: the config copy is private to bat's user (0600: it may hold
  keys), and what the agent writes into the run folder then belongs to that user, not
  to a uid of the image (a generated agent runs as 10001) that could neither read the
  copy nor write its spans.
* The container's output is followed into the replica's log in the run folder as it
  comes (``agent-<model>.log``; ``agent-<model>.replica-<n>.log`` with several).
* Every container is labelled with the run folder, the model and the replica; it is
  removed when its replica stops (at the end, on error, on Ctrl-C), and a later start
  in the same run folder (``--resume`` after bat was killed) removes any it left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bat.errors import OperationError
from bat.evaluation.run.agent_card import CARD_PATHS, card_answers
from bat.evaluation.run.agent_process import AgentStartError, StartedAgent

LABEL = "org.bat.eval"  # the run folder; beside it .model and .replica


def engine_is_local(environ: dict[str, str] | None = None) -> bool:
    """Whether the engine runs on this machine (it can mount bat's folders)."""
    host = (os.environ if environ is None else environ).get("DOCKER_HOST", "")
    return not host or host.startswith("unix://")


def engine_host_name(environ: dict[str, str] | None = None) -> str:
    """Where an agent on the engine's host network is reached: 127.0.0.1 for a local
    engine, else the host name of ``DOCKER_HOST`` (``tcp://box:2376``, ``ssh://me@box``)."""
    if engine_is_local(environ):
        return "127.0.0.1"
    host = (os.environ if environ is None else environ)["DOCKER_HOST"]
    try:
        return urlsplit(host).hostname or "127.0.0.1"
    except ValueError:
        return "127.0.0.1"


def replica_port(first: int, replica: int, *, local: bool) -> int:
    """The port replica ``replica`` (from 1) listens on: the first at ``agent_url``'s port;
    the others, on a local engine, a port the system has free now (a fixed +1, +2 may be
    taken by anything on a busy machine); on a remote one, ``first + replica - 1``, which
    bat cannot check and a firewall rule can name."""
    if replica == 1:
        return first
    if not local:
        return first + replica - 1
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def container_env(
    dotenv: dict[str, str], shell: dict[str, str], overrides: dict[str, str]
) -> dict[str, str]:
    """The container's environment: ``.env``'s names (the shell's value where it has
    one), then ``overrides`` (``evaluation.agent.env``, the model's settings, ``PORT``)."""
    env = {name: shell.get(name, value) for name, value in dotenv.items()}
    env.update(overrides)
    return env


def find_image(client: Any, ref: str, say=print) -> str:
    """The id of image ``ref`` on the engine, pulled first when the engine lacks it."""
    from docker.errors import APIError, DockerException, ImageNotFound

    from bat.images.engine import engine_address
    from bat.images.stream import one_line

    try:
        return client.inspect_image(ref)["Id"]
    except ImageNotFound:
        pass
    except (APIError, DockerException) as exc:
        raise OperationError(f"cannot read image {ref}: {one_line(str(exc))}") from None
    say(f"pulling {ref} (the engine at {engine_address()} does not have it)")
    try:
        for event in client.pull(ref, stream=True, decode=True):
            if isinstance(event, dict) and event.get("error"):
                raise APIError(str(event["error"]))
        return client.inspect_image(ref)["Id"]
    except (APIError, DockerException) as exc:
        raise OperationError(
            f"image {ref} is not on the engine at {engine_address()} and cannot be pulled "
            f"({one_line(str(exc), 160)}); build it with `bat build` or name another image"
        ) from None


def remove_left_behind(client: Any, run_dir: Path, model_dir: str) -> list[str]:
    """Remove the containers an earlier bat left for this run folder and model; their ids."""
    filters = {"label": [f"{LABEL}={run_dir}", f"{LABEL}.model={model_dir}"]}
    found = [c["Id"] for c in client.containers(all=True, filters=filters)]
    for container in found:
        with contextlib.suppress(Exception):
            client.remove_container(container, force=True)
    return found


class ContainerAgent(StartedAgent):
    """One replica: a container of the agent's image, started, watched and removed."""

    def __init__(
        self,
        client: Any,
        image: str,
        *,
        env: dict[str, str],
        log: Path,
        url: str,
        labels: dict[str, str],
        mounts: list[Path],
        startup_timeout_s: float,
        shutdown_timeout_s: float,
        user: str | None = None,
    ) -> None:
        self.client = client
        self.user = user
        self.image = image
        self.env = env
        self.log = log
        self.url = url
        self.labels = labels
        self.mounts = mounts
        self.startup_timeout_s = startup_timeout_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self.container: str | None = None
        self.stale_stopped: int | None = None  # the AgentProcess interface: never a pid here
        self.cancelled = False
        self._exit: int | None = None  # the container's exit status once it has ended
        self._oom = False
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        from docker.errors import APIError, DockerException

        from bat.images.stream import one_line

        if card_answers(self.url, timeout_s=1):
            raise OperationError(
                f"something already answers at {self.url}: stop it, or choose another "
                "agent_url port"
            )
        self.log.parent.mkdir(parents=True, exist_ok=True)
        binds = {str(path): {"bind": str(path), "mode": "rw"} for path in self.mounts}
        try:
            created = self.client.create_container(
                self.image,
                environment=self.env,
                labels=self.labels,
                user=self.user,
                host_config=self.client.create_host_config(network_mode="host", binds=binds),
            )
            self.container = created["Id"]
            self._exit, self._oom = None, False
            self.client.start(self.container)
        except (APIError, DockerException) as exc:
            self._remove()
            said = getattr(exc, "explanation", None) or str(exc)  # the engine's words
            raise OperationError(
                f"cannot start a container of {self.image}: {one_line(str(said), 200)}"
            ) from None
        self._follow(self.container)

    def _follow(self, container: str) -> None:
        """Two threads per container: its output into the log, and its exit."""
        from bat.images.engine import connect

        # A client of their own, without a timeout: calls that last as long as the
        # container must not hold the connection the runner's calls need, nor time out.
        watcher = connect(timeout=None)

        def copy_output() -> None:
            fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "ab", buffering=0) as out, contextlib.suppress(Exception):
                for chunk in watcher.logs(container, stream=True, follow=True):
                    out.write(chunk)

        def wait_exit() -> None:
            try:
                status = watcher.wait(container, timeout=None).get("StatusCode", -1)
            except Exception:
                status = -1  # the engine lost it: as good as dead
            with contextlib.suppress(Exception):
                self._oom = bool(watcher.inspect_container(container)["State"].get("OOMKilled"))
            if container == self.container:
                self._exit = int(status)

        self._threads = [
            threading.Thread(target=copy_output, daemon=True, name="bat-replica-log"),
            threading.Thread(target=wait_exit, daemon=True, name="bat-replica-exit"),
        ]
        for thread in self._threads:
            thread.start()

    def _ended(self) -> OperationError | None:
        if self.alive():
            return None
        self._settle()  # its last words into the log first
        return AgentStartError(
            f"the agent's container ({self.image}) ended with {self.describe_exit()} "
            "before it was ready",
            self.log,
        )

    def _too_slow(self) -> OperationError:
        return AgentStartError(
            f"the agent's container did not answer at {self.url}{CARD_PATHS[0]} within "
            f"{self.startup_timeout_s:g} s (evaluation.agent_startup_timeout_s; does the "
            "image listen on PORT?)",
            self.log,
        )

    def alive(self) -> bool:
        return self.container is not None and self._exit is None

    def describe_exit(self) -> str:
        code = self._exit
        if code is None:
            return "still running"
        if self._oom:
            return f"exit status {code} (out of memory)"
        if code > 128:  # a shell's way, and the engine's: 128 + the signal's number
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(code - 128).name}"
        return f"exit status {code}"

    def stop(self) -> None:
        """Stop the container (SIGTERM, SIGKILL after the shutdown timeout) and remove it."""
        if self.container is None:
            return
        with contextlib.suppress(Exception):
            self.client.stop(self.container, timeout=max(1, round(self.shutdown_timeout_s)))
        self._settle()
        self._remove()

    def _settle(self, timeout_s: float = 5.0) -> None:
        """Let the log copy take the ended container's last words (and its exit be seen)."""
        for thread in self._threads:
            thread.join(timeout=timeout_s)

    def _remove(self) -> None:
        container, self.container = self.container, None
        if container is not None:
            with contextlib.suppress(Exception):
                self.client.remove_container(container, force=True)

    def close(self) -> None:
        self.stop()
