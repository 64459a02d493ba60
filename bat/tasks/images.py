"""``bat build`` and ``bat push``: the agent's container image, built and pushed.

Both tasks resolve the same settings (the image reference by the precedence in
:mod:`bat.images.settings`, the context, the remote host) from their flags, the flags
an earlier image task of the same command line was given, and the Invoke configuration
(``docker.*`` and ``images.*`` keys, ``BAT_*`` variables, ``bat.yaml``), then call
:mod:`bat.images.operations`.

``push`` builds first through an Invoke ``pre`` task. Invoke gives a pre task no flags,
so push's pre task is a :class:`_BuildForPush` call of ``build`` that carries the flags
push itself was given (``bat push --version 2`` builds version 2, once). Invoke
deduplicates equal calls, so ``bat build push`` builds once; and a build made earlier
in the same run is never repeated (``bat build --version 2 push``: the flags given to
``build`` apply to the later ``push`` too).

Mounted in another project's ``tasks.py``, copy the defaults to your root collection
(``ns.configure(images.ns.configuration())``): Invoke gives a pre/post task the root's
configuration only.
"""

from __future__ import annotations

import inspect
from typing import Any

from invoke import Argument, Call, Collection, Context, task

from bat.tasks._options import BatTask, command

DEFAULTS: dict[str, dict[str, Any]] = {
    "docker": {"registry": None, "repo": None},
    "images": {
        "context": ".",
        "version": None,
        "no_cache": False,
        "host": None,
        "identity": None,
        "known_hosts": "~/.ssh/known_hosts",
        "accept_new_host_key": False,
        "username": None,
    },
}

_SHORT = {"context": "C"}
_HELP = {
    "context": "DIR: the build context, with the Dockerfile (default: .).",
    "docker-registry": "REGISTRY: host[:port][/path] (else BAT_DOCKER_REGISTRY, .env).",
    "repo": "REPO: image repository (else BAT_DOCKER_REPO, .env, agent.json name).",
    "version": "VERSION: tag and VERSION build argument (default: git describe, agent.json).",
    "host": "[USER@]HOST[:PORT]: run it on this host's Docker engine, over SSH.",
    "identity": "FILE: the SSH private key for --host.",
    "accept-new-host-key": "Trust --host's key if it is not in known_hosts yet (and save it).",
}


@command(
    short=_SHORT,
    help={**_HELP, "no-cache": "Build every step anew, without the engine's layer cache."},
)
def build(
    c: Context,
    context: str | None = None,
    docker_registry: str | None = None,
    repo: str | None = None,
    version: str | None = None,
    no_cache: bool = False,
    host: str | None = None,
    identity: str | None = None,
    accept_new_host_key: bool = False,
) -> None:
    """Build the agent's image {registry}/{repo}:{version} (on --host over SSH if given).

    VERSION is both the tag and the VERSION build argument. The context's .dockerignore
    is honoured; the full log is kept in <context>/.bat/logs/.
    """
    flags = {
        "context": context,
        "docker_registry": docker_registry,
        "repo": repo,
        "version": version,
        "no_cache": no_cache,
        "host": host,
        "identity": identity,
        "accept_new_host_key": accept_new_host_key,
    }
    _build(c, flags, for_push=isinstance(c, _PushContext))


class _PushContext(Context):
    """The context of push's pre-task build: the build must have a registry to push to."""


class _BuildForPush(Call):
    """``build`` as push's pre task, called with the flags ``push`` was given."""

    def __init__(self, task=None, called_as=None, args=None, kwargs=None) -> None:
        # Invoke clones calls (a collection loaded from a tasks.py is a deep copy).
        super().__init__(task if task is not None else build, called_as=called_as, args=args)

    @property  # type: ignore[override]
    def kwargs(self) -> dict[str, Any]:
        given = {name: argument.value for name, argument in _PUSH_ARGUMENTS.items()}
        return {name: given.get(name, default) for name, default in _BUILD_PARAMS.items()}

    @kwargs.setter
    def kwargs(self, value: dict[str, Any]) -> None:
        """Ignored: the keyword arguments are push's, read when the call runs."""

    def make_context(self, config: Any) -> Context:
        return _PushContext(config=config)


# push's arguments as the parser filled them in the current run (see _PushTask). Module
# state, because Invoke copies tasks (every copy of push shares what it parsed).
_PUSH_ARGUMENTS: dict[str, Argument] = {}


class _SharedArgument(Argument):
    """An Argument whose copies are itself, so the values parsed for it can be read later.

    Invoke's parser works on deep copies of each task's arguments; sharing them lets
    push's pre-task call see what push was given on the command line.
    """

    def __deepcopy__(self, memo: dict) -> _SharedArgument:
        return self


class _PushTask(BatTask):
    """``push``: shares its parsed arguments with :class:`_BuildForPush`."""

    def get_arguments(self, ignore_unknown_help: bool | None = None) -> list[Argument]:
        arguments = super().get_arguments(ignore_unknown_help)
        for argument in arguments:
            argument.__class__ = _SharedArgument
        _PUSH_ARGUMENTS.clear()
        _PUSH_ARGUMENTS.update((argument.name, argument) for argument in arguments)
        return arguments


@task(
    klass=_PushTask,
    pre=[_BuildForPush()],
    short=_SHORT,
    help={
        **_HELP,
        "username": "USER: log in to the registry as USER (password: stdin, BAT_DOCKER_PASSWORD).",
    },
)
def push(
    c: Context,
    context: str | None = None,
    docker_registry: str | None = None,
    repo: str | None = None,
    version: str | None = None,
    host: str | None = None,
    identity: str | None = None,
    accept_new_host_key: bool = False,
    username: str | None = None,
) -> None:
    """Build (as a pre task), then push {registry}/{repo}:{version} and print its digest.

    A registry must be named (flag, BAT_DOCKER_REGISTRY, configuration or .env): bat
    never pushes to Docker Hub unasked. Credentials: your Docker login, or --username
    with the password on stdin or in BAT_DOCKER_PASSWORD.
    """
    from bat.images.credentials import read_credentials
    from bat.images.operations import build_image, push_image

    flags = {
        "context": context,
        "docker_registry": docker_registry,
        "repo": repo,
        "version": version,
        "host": host,
        "identity": identity,
        "accept_new_host_key": accept_new_host_key,
    }
    resolved = _resolve(c, flags, require_registry=True)
    settings, spec, ssh = resolved
    if _key(resolved) not in _session(c)["built"]:
        # Not built in this run (push called from code with other arguments): build now.
        build_image(settings, no_cache=bool(_conf(c, "images.no_cache")), host=spec, ssh=ssh)
        _session(c)["built"].add(_key(resolved))
    user = username or _conf(c, "images.username")
    credentials = read_credentials(user, settings.registry_host) if user else None
    push_image(settings, credentials=credentials, host=spec, ssh=ssh)


_BUILD_PARAMS = {
    name: param.default
    for name, param in list(inspect.signature(build.body).parameters.items())[1:]
}


def _build(c: Context, flags: dict[str, Any], *, for_push: bool) -> None:
    from bat.images.operations import build_image

    resolved = _resolve(c, flags, require_registry=for_push)
    settings, spec, ssh = resolved
    built = _session(c)["built"]
    if _key(resolved) in built:
        where = f" on {spec}" if spec else ""
        print(f"{settings.ref} is already built{where} in this run")
        return
    no_cache = bool(flags.get("no_cache") or _conf(c, "images.no_cache"))
    build_image(settings, no_cache=no_cache, host=spec, ssh=ssh)
    built.add(_key(resolved))


def _resolve(c: Context, flags: dict[str, Any], *, require_registry: bool):
    """(ImageSettings, HostSpec or None, SshOptions) from flags, earlier flags and config."""
    from bat.images.remote import SshOptions
    from bat.images.settings import host_spec, resolve

    session = _session(c)
    given = {**session["given"], **{k: v for k, v in flags.items() if v not in (None, False, "")}}

    def pick(name: str, key: str | None) -> Any:
        if given.get(name) not in (None, False, ""):
            return given[name]
        return _conf(c, key) if key else None

    settings = resolve(
        pick("context", "images.context") or ".",
        registry_flag=pick("docker_registry", None),
        registry_config=_conf(c, "docker.registry"),
        repo_flag=pick("repo", None),
        repo_config=_conf(c, "docker.repo"),
        version_flag=pick("version", None),
        version_config=_conf(c, "images.version"),
        require_registry=require_registry,
    )
    host = pick("host", "images.host")
    spec = host_spec(host) if host else None
    ssh = SshOptions(
        identity=pick("identity", "images.identity"),
        known_hosts=_conf(c, "images.known_hosts") or DEFAULTS["images"]["known_hosts"],
        accept_new_host_key=bool(pick("accept_new_host_key", "images.accept_new_host_key")),
    )
    given.pop("no_cache", None)
    session["given"] = given
    return settings, spec, ssh


def _key(resolved) -> tuple[str, str, str]:
    settings, spec, _ = resolved
    return (str(spec or ""), str(settings.context), settings.ref)


def _session(c: Context) -> dict[str, Any]:
    """What the image tasks of one run share: flags given so far, images built so far.

    Kept on the run's Config object (the one every task of an Invoke run shares), not in
    the configuration itself, so it is never mistaken for a setting.
    """
    state = getattr(c.config, "_bat_images", None)
    if state is None:
        state = {"given": {}, "built": set()}
        object.__setattr__(c.config, "_bat_images", state)
    return state


def _conf(c: Context, key: str) -> Any:
    """The configured ``key`` (e.g. ``images.context``), else its default here."""
    node: Any = c.config
    default: Any = DEFAULTS
    for part in key.split("."):
        default = default[part]
    try:
        for part in key.split("."):
            node = node[part]
    except (KeyError, TypeError):
        return default
    return node


ns = Collection("images")
ns.add_task(build)
ns.add_task(push)
ns.configure(DEFAULTS)
