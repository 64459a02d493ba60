"""bat's settings as pydantic models, and the reading of the layers that hold them.

One model per group of settings, the top-level keys of the command groups'
``ns.configure`` defaults: ``init`` (:class:`InitSettings`), ``eval``
(:class:`EvalSettings`), ``docker`` (:class:`DockerSettings`) and ``images``
(:class:`ImagesSettings`). A group of another program built on bat
(``BatProgram(namespace=...)``) gets a model made from its defaults, each key typed by
its default. Invoke's own sections (``run``, ``tasks``, ...) get one made from Invoke's
defaults that checks only what would otherwise break Invoke's merge (a mapping where
Invoke has one) and reads booleans as strictly as bat's; other keys there are Invoke's.

The same model reads a file and the ``BAT_*`` variables, so a value means the same from
either. A variable is always text, so the types here take text as well as YAML's own
values: ``'9100'`` and ``9100`` are one port, ``'off'`` and ``false`` one boolean. That
is why they are not eval.yaml's types (:mod:`bat.evaluation.inputs.config`), which only
ever read YAML and refuse a quoted number or a word for a flag. What they share is how a
problem is told: :func:`bat.locate.validation_problems` turns pydantic's errors into one
``file: key.path (line N): problem`` line each, the line from bat.locate's map of the
file; a variable's problem names the variable and the key
(``environment: BAT_INIT_AGENT_PORT (init.agent.port): ...``).

A layer keeps only the keys it sets (``exclude_unset``): it overrides the layers below
key by key, and the defaults stay in the ``ns.configure`` blocks, which Invoke merges
under everything. Imported only when a settings file or a ``BAT_*`` variable of a
setting exists (:func:`bat.cli.config.read_settings`): pydantic is slow to import.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from invoke import Config
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    create_model,
)
from pydantic_core import PydanticCustomError

from bat.errors import BatError, ConfigError
from bat.evaluation.inputs.prices import Prices
from bat.figures import counted
from bat.input_files import CONFIG_LIMIT, dotted, json_lines, parse_json, parse_yaml, read_text
from bat.locate import validation_problems

TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")

_WHOLE = re.compile(r"[+-]?[0-9]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ufffe\uffff]")
_KIND = "a configuration file"

# -- how one value is read ------------------------------------------------------------


def shown(value: Any) -> str:
    """A value quoted for an error line, control characters escaped, long ones cut."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _a(value: Any) -> str:
    """``a list``, ``a mapping``: what a value is, for "expected text, got a list"."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


def boolean(value: Any) -> bool:
    """``true/false``, ``yes/no``, ``on/off``, ``1/0`` in any case (and YAML's booleans).

    Nothing else: a word bat does not know must not silently mean true.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise ValueError(f"expected true or false (also yes/no, on/off, 1/0), got {shown(value)}")


def whole_number(value: Any) -> int:
    """An integer, or text of digits; not a boolean, not a fraction."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        try:
            return int(value.strip())
        except ValueError:  # more digits than Python converts
            pass
    raise ValueError(f"expected a whole number, got {shown(value)}")


def port(value: Any) -> int:
    """A TCP port, by bat's one rule (:mod:`bat.ports`)."""
    from bat.ports import port_number

    return port_number(value)


def number(value: Any) -> float:
    """A finite number (``.inf`` and ``.nan`` are not amounts of anything)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {shown(value)}")
    try:
        result = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"expected a number, got {shown(value)}") from None
    if not math.isfinite(result):
        raise ValueError(f"expected a finite number, got {shown(value)}")
    return result


def text(value: Any) -> str:
    """Non-empty text without control characters (a path, a name, a host).

    A YAML number or boolean is refused rather than turned into text: ``version: 1.10``
    reads as ``1.1`` and ``model: no`` as ``False``, so only quotes keep what was meant.
    """
    if isinstance(value, bool | int | float):
        raise ValueError(f"expected text, got {shown(value)} (write it in quotes)")
    if not isinstance(value, str):
        raise ValueError(f"expected text, got {_a(value)}")
    if not value.strip():
        raise ValueError("is empty (to use the default, leave the setting out or unset it)")
    if _CONTROL.search(value):
        raise ValueError(f"contains a control character: {shown(value)}")
    return value


def names(value: Any) -> str:
    """Comma-separated names, or (in a file) a list of them: ``planner,critic``."""
    if isinstance(value, list | tuple):
        if not value:
            raise ValueError("is an empty list (to use the default, leave the setting out)")
        return ",".join(text(item) for item in value)
    return text(value)


def image(value: Any) -> bool | str:
    """``true`` (the image ``bat build`` tags) or an image reference (text)."""
    if value is True or (isinstance(value, str) and value.strip().lower() == "true"):
        return True  # from a file, or BAT_EVAL_IMAGE=true in the environment
    return text(value)


def _not_a_mapping(value: Any) -> Any:
    """A value of Invoke's that Invoke's merge could not put over its own default."""
    if isinstance(value, Mapping):
        raise ValueError("expected a single value, got a mapping (Invoke's default is not one)")
    return value


def _read_by(read: Any, *, optional: bool = False) -> BeforeValidator:
    """``read`` for a value that is given; ``null`` is "not set" when ``optional``."""

    def validate(value: Any) -> Any:
        if value is None:
            if optional:
                return None
            raise ValueError("must have a value (leave the setting out to use its default)")
        return read(value)

    return BeforeValidator(validate)


def _empty_if_null(value: Any) -> Any:
    """A section written with every key commented out (``eval:`` alone) is YAML's null:
    the same as no section, as eval.yaml's blocks."""
    return {} if value is None else value


Boolean = Annotated[bool, _read_by(boolean)]
WholeNumber = Annotated[int, _read_by(whole_number)]
Number = Annotated[float, _read_by(number)]
Port = Annotated[int, _read_by(port)]
Text = Annotated[str, _read_by(text)]
OptionalText = Annotated[str | None, _read_by(text, optional=True)]
Names = Annotated[str, _read_by(names)]
Image = Annotated[bool | str | None, _read_by(image, optional=True)]
Block = BeforeValidator(_empty_if_null)
NotAMapping = Annotated[Any, BeforeValidator(_not_a_mapping)]

# Each entry whole: a layer's entry replaces a lower layer's of the same model, never
# merged key by key (exclude_unset would keep only the keys the file wrote).
TeamPrices = Annotated[
    Prices,
    PlainSerializer(
        lambda prices: {name: entry.model_dump() for name, entry in prices.root.items()},
        when_used="unless-none",
    ),
]

# -- the groups ------------------------------------------------------------------------
# A field's default None means "this layer does not set it": only the keys a layer sets
# are kept (exclude_unset), and the real defaults are the ns.configure blocks.


class _Section(BaseModel):
    """A mapping of settings: a key it does not hold is an error."""

    # protected_namespaces: init.agent's keys model and model_provider are settings.
    model_config = ConfigDict(extra="forbid", protected_namespaces=())


class InitAgentSettings(_Section):
    """``init.agent``: what ``bat init.agent`` makes when its flags do not say."""

    output_dir: Text = None
    clients: Names = None
    port: Port = None
    model: OptionalText = None
    model_provider: Text = None


class InitSettings(_Section):
    agent: Annotated[InitAgentSettings, Block] = None


class EvalSettings(_Section):
    """``eval``: the evaluation file, the image ``eval.run`` evaluates, whether the
    stages after a run draw its charts and report, and a team's prices (under eval.yaml's
    ``prices:``, over genai-prices': kept once for every project)."""

    file: Text = None
    image: Image = None
    charts: Boolean = None
    # eval.yaml's own type (a mapping, no variable can hold one): a price reads the same
    # from either file. null or every entry commented out: no prices of this layer.
    prices: TeamPrices = None


class DockerSettings(_Section):
    """``docker``: where ``build`` and ``push`` name the image."""

    registry: OptionalText = None
    repo: OptionalText = None


class ImagesSettings(_Section):
    """``images``: how ``build`` and ``push`` build, and which Docker host they use."""

    context: Text = None
    version: OptionalText = None
    no_cache: Boolean = None
    network: OptionalText = None
    host: OptionalText = None
    identity: OptionalText = None
    known_hosts: Text = None
    accept_new_host_key: Boolean = None
    username: OptionalText = None


GROUPS: dict[str, type[BaseModel]] = {
    "init": InitSettings,
    "eval": EvalSettings,
    "docker": DockerSettings,
    "images": ImagesSettings,
}

# -- models made from defaults: other programs' groups, Invoke's sections ------------------


class _InvokeSection(BaseModel):
    """One of Invoke's sections: keys of Invoke's own beside the ones it has defaults for."""

    model_config = ConfigDict(extra="allow", protected_namespaces=())


def _kind_of_default(default: Any) -> Any:
    """The type a default implies (``False``: a boolean, ``9900``: a whole number, ...)."""
    if isinstance(default, bool):
        return Boolean
    if isinstance(default, int):
        return WholeNumber
    if isinstance(default, float):
        return Number
    if isinstance(default, str):
        return Text
    return OptionalText  # None (or a value that says no more): text, or not set


def _kind_of(name: str, default: Any, *, invoke: bool = False) -> Any:
    """The type of a key whose default is ``default``: a section of its own where that is
    a mapping; else the type it implies (:func:`_kind_of_default`), or in Invoke's
    sections (``invoke``) a strict boolean or anything but a mapping."""
    if isinstance(default, Mapping):
        return Annotated[model_of_defaults(name, default, invoke=invoke), Block]
    if invoke:
        return Boolean if isinstance(default, bool) else NotAMapping
    return _kind_of_default(default)


def model_of_defaults(name: str, defaults: Mapping[str, Any], *, invoke: bool = False) -> Any:
    """A model of the keys of ``defaults``, each typed by :func:`_kind_of`."""
    kinds = {
        key: _kind_of(f"{name}.{key}", default, invoke=invoke) for key, default in defaults.items()
    }
    return _model(name, kinds, _InvokeSection if invoke else _Section)


def settings_model(defaults: Mapping[str, Any]) -> Any:
    """The model of a whole settings file for a command tree whose merged ``ns.configure``
    defaults are ``defaults``: Invoke's sections, bat's groups, and a model made from
    the defaults of any other group."""
    kinds = {
        key: _kind_of(key, default, invoke=True)
        for key, default in Config.global_defaults().items()
    }
    for key, default in defaults.items():
        kinds[key] = Annotated[GROUPS[key], Block] if key in GROUPS else _kind_of(key, default)
    return _model("Settings", kinds, _Section)


def _model(name: str, kinds: Mapping[str, Any], base: type[BaseModel]) -> Any:
    """A model with a field of type ``kinds[key]`` for each key, unset unless given.

    The keys are the fields' aliases: a key may be no Python name, or one of BaseModel's.
    """
    fields = {
        f"key_{index}": (kind, Field(default=None, alias=str(key)))
        for index, (key, kind) in enumerate(kinds.items())
    }
    return create_model(name, __base__=base, **fields)


def _fields(model: Any) -> dict[str, Any]:
    """``{key as written in a file: field}`` of a model."""
    return {field.alias or name: field for name, field in model.model_fields.items()}


def _section_at(model: Any, path: tuple) -> Any:
    """The model of the section at key ``path`` (None past a leaf or an unknown key)."""
    for key in path:
        field = _fields(model).get(key)
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def _is_setting(model: Any, path: tuple) -> bool:
    """Whether key ``path`` is a setting of ``model`` (not a section, not unknown)."""
    section = _section_at(model, path[:-1])
    return (
        section is not None
        and path[-1] in _fields(section)
        and _section_at(section, path[-1:]) is None
    )


# -- reading the layers ----------------------------------------------------------------


def read_settings(
    defaults: Mapping[str, Any],
    files: list[Path],
    variables: Mapping[str, tuple[tuple[str, ...], str]],
    runtime: Path | None,
) -> dict[str, Any]:
    """The settings of every layer merged, lowest first: ``files`` (/etc, ~, ./), the
    ``variables`` (``{name: (key path, value)}``), the ``runtime`` (``-f``) file.

    Every problem of every layer is found before any is reported, so a user fixes them
    in one go: one is a :class:`~bat.errors.ConfigError` of its own line; several, one
    headline with a line each.
    """
    model = settings_model(defaults)
    problems: list[str] = []
    layers = [_file_layer(model, path, problems) for path in files]
    layers.append(_variables_layer(model, variables, problems))
    if runtime is not None:
        layers.append(_file_layer(model, runtime, problems))
    if len(problems) == 1:
        raise ConfigError(problems[0])
    if problems:
        raise ConfigError(f"bat's settings have {counted(len(problems), 'problem')}", problems)
    merged: dict[str, Any] = {}
    for layer in layers:
        _merge(merged, layer)
    return merged


def _file_layer(model: Any, path: Path, problems: list[str]) -> dict[str, Any]:
    """The settings of one file; its problems are added to ``problems``."""
    try:
        data, text = _read(path)
    except FileNotFoundError:  # gone since it was found: as if it had never been there
        return {}
    except BatError as exc:
        problems += [exc.message, *exc.details]
        return {}
    try:
        return _settings_of(model, {} if data is None else data)
    except ValidationError as exc:
        suffix = path.suffix.lower()
        lines = None  # YAML: mapped by validation_problems
        if suffix == ".json":
            lines = json_lines(text)
        elif suffix == ".py":
            lines = {}
        problems += validation_problems(path, text, _worded(exc, model), lines=lines)
        return {}


def _variables_layer(
    model: Any, variables: Mapping[str, tuple[tuple[str, ...], str]], problems: list[str]
) -> dict[str, Any]:
    """The settings of the ``BAT_*`` variables; a problem names the variable and the key.

    A variable that names a key of the defaults but no setting (a key a task keeps while
    a command line runs) is left alone, as Invoke leaves every variable that names no key.
    """
    data: dict[str, Any] = {}
    names: dict[tuple, str] = {}
    for variable, (path, value) in sorted(variables.items()):
        if not _is_setting(model, path):
            continue
        node = data
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
        names[path] = f"{variable} ({'.'.join(path)})"
    try:
        return _settings_of(model, data)
    except ValidationError as exc:
        named = lambda path: (names.get(path, dotted(path)),)  # noqa: E731
        problems += validation_problems("environment", "", exc, fix_path=named, lines={})
        return {}


def _settings_of(model: Any, data: Any) -> dict[str, Any]:
    """``data`` validated: the keys it sets, each read by its type (a ValidationError else)."""
    return model.model_validate(data).model_dump(exclude_unset=True, by_alias=True)


def _read(path: Path) -> tuple[Any, str]:
    """The data of a settings file and its text, by bat's bounded reader; a ``.py`` file
    is run, as Invoke runs one, and its names that do not start with ``__`` are its data."""
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json", ".py"):
        raise ConfigError(
            f"{path}: unsupported configuration file type (use .yaml, .yml, .json or .py)"
        )
    text = read_text(path, limit=CONFIG_LIMIT, kind=_KIND)
    if suffix == ".json":
        return parse_json(text, path), text
    if suffix == ".py":
        return _run_python(path, text), ""
    return parse_yaml(text, path), text


def _run_python(path: Path, source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "bat_settings", "__file__": str(path)}
    try:
        exec(compile(source, str(path), "exec"), namespace)
    except Exception as exc:  # a Python settings file can fail in any way its code can
        raise ConfigError(f"{path}: cannot load: {type(exc).__name__}: {exc}") from None
    return {key: value for key, value in namespace.items() if not key.startswith("__")}


def _worded(error: ValidationError, model: Any) -> ValidationError:
    """``error`` with each unknown key told as bat tells it: a section or a setting, the
    closest known key (a typo is the usual cause) and the keys that section has."""
    details = []
    for item in error.errors(include_url=False):
        detail = {key: item[key] for key in ("type", "loc", "input", "ctx") if key in item}
        if item["type"] == "extra_forbidden":
            message = _unknown(model, item["loc"])
            detail["type"] = PydanticCustomError("unknown_key", "{message}", {"message": message})
            detail.pop("ctx", None)
        details.append(detail)
    return ValidationError.from_exception_data(error.title, details)


def _unknown(model: Any, loc: tuple) -> str:
    known = list(_fields(_section_at(model, loc[:-1]) or model))
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    if len(loc) > 1:
        return f"unknown setting{hint} ({dotted(loc[:-1])} has: {', '.join(known)})"
    invoke = set(Config.global_defaults())
    ours = ", ".join(sorted(key for key in known if key not in invoke))
    return f"unknown section{hint} (bat's sections: {ours}; Invoke's: {', '.join(sorted(invoke))})"


def _merge(base: dict[str, Any], layer: Mapping[str, Any]) -> None:
    """``layer`` over ``base``, key by key: a mapping in both is merged, else ``layer``'s wins."""
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
