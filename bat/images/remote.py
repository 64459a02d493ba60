"""Build and push on a remote Docker host, over SSH with Fabric.

How it works: one Fabric ``Connection`` per operation; a temporary folder made on the
host with ``mktemp -d``; the build context, already packed locally (``.dockerignore``
applied), uploaded into it as one tar archive over SFTP and unpacked there; then the
host's own ``docker`` command run over the same connection, ``docker build`` of that
folder or ``docker push``, their output streamed back line by line as it comes. The temporary
folder is removed in a ``finally``, so a failed build, a refused push or Ctrl-C leaves
nothing behind.

Why the host's ``docker`` command and not the docker SDK over ``ssh://``: the SDK's SSH
transport would send the context through the engine API rather than as an SFTP upload,
and it needs ``docker system dial-stdio``, i.e. the docker command on the host, anyway.
The build runs with ``DOCKER_BUILDKIT=0``, the classic builder, so its output has the
same ``Step n/m : ...`` lines as the local build API and one parser reads both.

Credentials given with ``--username`` reach the host only through the standard input of
``docker login --password-stdin``, into a ``DOCKER_CONFIG`` inside the temporary folder:
never on a command line, never in the host user's own Docker configuration, and gone
with the folder. Without ``--username`` the host user's Docker credentials are used.

Host keys: the host must already be in ``known_hosts`` (``~/.ssh/known_hosts`` unless
``images.known_hosts`` says otherwise, plus ``/etc/ssh/ssh_known_hosts``). An unknown host
is refused, naming ``--accept-new-host-key``; with that flag a new key is appended to the
file (a changed key is always refused, as OpenSSH's ``accept-new`` does).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import shlex
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from bat.errors import InputError, OperationError, UsageError
from bat.images.credentials import Credentials
from bat.images.display import _Display
from bat.images.settings import HostSpec, ImageSettings
from bat.images.stream import BuildTracker, PushTracker, one_line, redact, registry_error

SYSTEM_KNOWN_HOSTS = "/etc/ssh/ssh_known_hosts"
CONNECT_TIMEOUT_S = 15


@dataclass(frozen=True)
class SshOptions:
    """How to reach the host: a key file, the known_hosts file, and whether to trust a new key."""

    identity: str | None = None
    known_hosts: str = "~/.ssh/known_hosts"
    accept_new_host_key: bool = False


class _UnknownHost(Exception):
    def __init__(self, name: str, key: Any) -> None:
        super().__init__(name)
        self.name = name
        self.key = key


def fingerprint(key: Any) -> str:
    """OpenSSH's ``SHA256:...`` fingerprint of a paramiko key."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _policies(known_hosts: Path, notice: Callable[[str], None]) -> tuple[type, type]:
    import paramiko

    class Refuse(paramiko.MissingHostKeyPolicy):
        """Never connect to a host whose key is not known."""

        def missing_host_key(self, client, hostname, key):
            raise _UnknownHost(hostname, key)

    class AcceptNew(paramiko.MissingHostKeyPolicy):
        """Trust a host seen for the first time, and remember its key."""

        def missing_host_key(self, client, hostname, key):
            known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(known_hosts, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as handle:
                handle.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
            client.get_host_keys().add(hostname, key.get_name(), key)
            notice(
                f"Added the host key of {hostname} ({key.get_name()} {fingerprint(key)}) "
                f"to {known_hosts}"
            )

    return Refuse, AcceptNew


def load_known_hosts(client: Any, known_hosts: Path) -> None:
    """Load the system's and the user's known_hosts files into a paramiko client."""
    import paramiko

    for path in (Path(SYSTEM_KNOWN_HOSTS), known_hosts):
        if path.is_file():
            try:
                client.load_system_host_keys(str(path))
            except (OSError, paramiko.SSHException) as exc:
                raise OperationError(f"{path}: cannot read known hosts: {exc}") from None
            except UnicodeDecodeError as exc:
                # Host keys are ASCII; other bytes mean the wrong file or a damaged one,
                # and no host key in it can be trusted to be the one meant.
                raise InputError(
                    f"{path}: not a known_hosts file: not UTF-8 text ({exc.reason} "
                    f"at byte {exc.start}); fix or remove the damaged line"
                ) from None


def host_key_known(spec: HostSpec, known_hosts: str | os.PathLike[str]) -> bool:
    """Whether a key of ``spec``'s host is in the known_hosts files ``RemoteDocker``
    trusts (so a connection would not be refused as an unknown host). No connection is
    made. OpenSSH names a host on another port than 22 ``[host]:port``."""
    import paramiko

    keys = paramiko.HostKeys()

    class Collect:  # what load_known_hosts calls on a client, into one set of keys
        def load_system_host_keys(self, path: str) -> None:
            keys.load(path)

    load_known_hosts(Collect(), Path(os.path.expanduser(os.fspath(known_hosts))))
    name = spec.host if spec.port in (None, 22) else f"[{spec.host}]:{spec.port}"
    return keys.lookup(name) is not None


class RemoteDocker:
    """The Docker engine of ``[user@]host[:port]``, over SSH (a context manager)."""

    def __init__(self, spec: HostSpec, options: SshOptions, display: _Display) -> None:
        self.spec = spec
        self.options = options
        self.display = display
        self.conn: Any = None

    # -- connection ----------------------------------------------------------------

    def __enter__(self) -> RemoteDocker:
        self.conn = self._connect()
        try:
            self._check_docker()
        except BaseException:
            self.conn.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self.conn is not None:
            self.conn.close()

    def _connect(self) -> Any:
        import paramiko
        from fabric import Connection

        kwargs: dict[str, Any] = {}
        if self.options.identity:
            key = Path(os.path.expanduser(self.options.identity))
            if not key.is_file():
                raise UsageError(f"{self.options.identity}: no such identity file (--identity)")
            kwargs["key_filename"] = [str(key)]
        known_hosts = Path(os.path.expanduser(self.options.known_hosts))
        conn = Connection(
            self.spec.host,
            user=self.spec.user,
            port=self.spec.port,
            connect_timeout=CONNECT_TIMEOUT_S,
            connect_kwargs=kwargs,
        )
        client = conn.client
        load_known_hosts(client, known_hosts)
        refuse, accept_new = _policies(known_hosts, self.display.line)
        policy = accept_new if self.options.accept_new_host_key else refuse
        client.set_missing_host_key_policy(policy())
        target = str(self.spec)
        try:
            conn.open()
        except _UnknownHost as exc:
            raise OperationError(
                f"host {exc.name} is not in {known_hosts}: its key {exc.key.get_name()} "
                f"{fingerprint(exc.key)} is unknown, so bat refuses to connect; if that "
                "fingerprint is right, run again with --accept-new-host-key to trust it"
            ) from None
        except paramiko.BadHostKeyException as exc:
            raise OperationError(
                f"the host key of {target} is not the one in {known_hosts} (got "
                f"{fingerprint(exc.key)}): someone may be impersonating it; if the host was "
                f"reinstalled, remove the old key with ssh-keygen -R {self.spec.host}"
            ) from None
        except paramiko.AuthenticationException:
            raise OperationError(
                f"SSH login to {target} was refused: check the user name and --identity "
                "(or your ssh-agent)"
            ) from None
        except paramiko.SSHException as exc:
            raise OperationError(f"SSH to {target} failed: {one_line(str(exc))}") from None
        except socket.gaierror:
            raise OperationError(
                f"cannot reach {target} over SSH: unknown host name; check --host"
            ) from None
        except (OSError, EOFError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise OperationError(
                f"cannot reach {target} over SSH: {one_line(reason or type(exc).__name__)}; "
                "check --host and that sshd runs there"
            ) from None
        return conn

    def _check_docker(self) -> None:
        result = self._run("docker version --format '{{.Server.Version}}'")
        if result.exited == 127:
            raise OperationError(f"no docker command on {self.spec}: install Docker there")
        if result.exited != 0:
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            reason = one_line(lines[-1]) if lines else f"exit status {result.exited}"
            raise OperationError(
                f"the Docker engine on {self.spec} does not answer: {reason}; start it there "
                "(or fix the DOCKER_HOST of that host's login environment)"
            )

    # -- operations ----------------------------------------------------------------

    def build(
        self,
        settings: ImageSettings,
        archive: IO[bytes],
        tracker: BuildTracker,
        *,
        no_cache: bool = False,
        network: str | None = None,
    ) -> str:
        """Upload ``archive`` and build ``settings.ref`` on the host; returns the image id."""
        with self.workdir() as folder:
            remote_tar = f"{folder}/context.tar"
            context = f"{folder}/context"
            self._upload(archive, remote_tar)
            unpack = self._run(
                f"mkdir {shlex.quote(context)} && tar -xf {shlex.quote(remote_tar)} "
                f"-C {shlex.quote(context)} && rm -f {shlex.quote(remote_tar)}"
            )
            if unpack.exited != 0:
                raise OperationError(
                    f"cannot unpack the build context on {self.spec}: "
                    f"{one_line(unpack.stderr) or f'exit status {unpack.exited}'}"
                )
            words = [
                "docker",
                "build",
                "--rm",
                "--force-rm",
                "--tag",
                settings.ref,
                "--build-arg",
                f"VERSION={settings.version.value}",
                "--file",
                f"{context}/{settings.dockerfile}",
            ]
            if no_cache:
                words.append("--no-cache")
            if network:
                words += ["--network", network]
            command = f"DOCKER_BUILDKIT=0 {shlex.join([*words, context])}"
            errors: list[str] = []
            result = self._run(command, on_out=tracker.feed, on_err=_collect(errors, tracker.log))
            if result.exited != 0:
                raise tracker.failure(_last_words(errors) or f"exit status {result.exited}")
        inspect = self._run(
            shlex.join(["docker", "image", "inspect", "--format", "{{.Id}}", settings.ref])
        )
        return inspect.stdout.strip() or settings.ref

    def push(
        self,
        settings: ImageSettings,
        tracker: PushTracker,
        credentials: Credentials | None = None,
    ) -> str:
        """Push ``settings.ref`` from the host; returns its digest."""
        secret = credentials.password if credentials else None
        username = credentials.username if credentials else None
        registry = settings.registry_host

        def refused(errors: list[str], status: int) -> OperationError:
            message = redact(_last_words(errors) or f"exit status {status}", [secret])
            return registry_error(
                message, registry=registry, ref=settings.ref, username=username, log=tracker.log
            )

        with self.workdir() as folder:
            prefix = ""
            if credentials is not None:
                config = f"{folder}/docker-config"
                prefix = f"DOCKER_CONFIG={shlex.quote(config)} "
                login = shlex.join(
                    [
                        "docker",
                        "login",
                        "--username",
                        credentials.username,
                        "--password-stdin",
                        registry,
                    ]
                )
                errors: list[str] = []
                result = self._run(
                    f"mkdir -m 700 {shlex.quote(config)} && {prefix}{login}",
                    stdin=credentials.password + "\n",
                    on_err=_collect(errors, tracker.log, secret),
                )
                if result.exited != 0:
                    raise refused(errors, result.exited)
                tracker.log.write(f"logged in to {registry} as {credentials.username}")
            errors = []
            result = self._run(
                prefix + shlex.join(["docker", "push", settings.ref]),
                on_out=tracker.text,
                on_err=_collect(errors, tracker.log, secret),
            )
            if result.exited != 0:
                raise refused(errors, result.exited)
        if not tracker.digest:
            raise OperationError(
                f"push of {settings.ref} on {self.spec} ended without a digest "
                f"(log: {tracker.log.shown()})"
            )
        return tracker.digest

    @contextlib.contextmanager
    def workdir(self) -> Iterator[str]:
        """A temporary folder on the host, removed afterwards whatever happens."""
        result = self._run('mktemp -d "${TMPDIR:-/tmp}/bat.XXXXXXXX"')
        folder = result.stdout.strip()
        if result.exited != 0 or not folder.startswith("/"):
            raise OperationError(
                f"cannot make a temporary folder on {self.spec}: "
                f"{one_line(result.stderr) or 'mktemp failed'}"
            )
        self.display.line(f"Working in {self.spec}:{folder} (removed afterwards)")
        try:
            yield folder
        finally:
            try:
                self._run(f"rm -rf -- {shlex.quote(folder)}")
            except Exception as exc:  # the connection may be gone; say so, keep the first error
                self.display.line(f"warning: could not remove {self.spec}:{folder}: {exc}")

    def _upload(self, archive: IO[bytes], remote_path: str) -> None:
        archive.seek(0, os.SEEK_END)
        size = archive.tell()
        archive.seek(0)

        def progress(sent: int, total: int) -> None:
            self.display.status(f"    uploading the context: {sent / 1e6:.1f}/{size / 1e6:.1f} MB")

        try:
            self.conn.sftp().putfo(archive, remote_path, file_size=size, callback=progress)
        except (OSError, EOFError) as exc:
            raise OperationError(
                f"upload of the build context to {self.spec} failed: {exc}"
            ) from None
        self.display.close()
        self.display.line(f"Uploaded the build context ({size / 1e6:.1f} MB) to {self.spec}")

    def _run(
        self,
        command: str,
        *,
        stdin: str | None = None,
        on_out: Callable[[str], None] | None = None,
        on_err: Callable[[str], None] | None = None,
    ) -> Any:
        """Run ``command`` on the host; returns Invoke's Result (never raises on exit status)."""
        import io

        out = _LineWriter(on_out)
        err = _LineWriter(on_err)
        try:
            result = self.conn.run(
                command,
                hide=False,
                warn=True,
                pty=False,
                echo=False,
                in_stream=io.StringIO(stdin) if stdin is not None else False,
                out_stream=out,
                err_stream=err,
            )
        except (OSError, EOFError) as exc:
            raise OperationError(f"lost the SSH connection to {self.spec}: {exc}") from None
        out.finish()
        err.finish()
        return result


class _LineWriter:
    """A stream for Invoke's runner: calls ``on_line`` with each complete line."""

    def __init__(self, on_line: Callable[[str], None] | None) -> None:
        self.on_line = on_line
        self.pending = ""

    def write(self, text: str) -> int:
        if self.on_line is not None:
            self.pending += text.replace("\r\n", "\n").replace("\r", "\n")
            *lines, self.pending = self.pending.split("\n")
            for line in lines:
                self.on_line(line)
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def finish(self) -> None:
        if self.pending and self.on_line is not None:
            self.on_line(self.pending)
        self.pending = ""


def _collect(errors: list[str], log: Any, secret: str | None = None) -> Callable[[str], None]:
    """An ``on_err`` that logs each line and keeps the ones that are not Docker's notices."""
    state = {"notice": False}

    def take(line: str) -> None:
        line = redact(line, [secret])
        log.write(line)
        if line.startswith("DEPRECATED:") or line.startswith("WARNING!"):
            state["notice"] = True
            return
        if state["notice"] and (line[:1].isspace() or not line.strip()):
            return
        state["notice"] = False
        if line.strip() and not line.startswith(
            ("Configure a credential helper", "https://docs.docker.com")
        ):
            errors.append(line.strip())

    return take


def _last_words(errors: list[str]) -> str:
    return " ".join(errors[-3:])
