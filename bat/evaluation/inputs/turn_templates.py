"""Turns that use the answers of earlier turns: ``"Repeat: {{ prev.output }}"``.

A turn of a dataset task is plain text unless it holds a template marker (``{{``,
``{%`` or ``{#``); plain text is sent as written and never goes near Jinja. A templated
turn is checked when the dataset is read (:func:`check_turns`: every problem is an
error with the task and the turn's number) and rendered just before it is sent
(:func:`render_turn`), from the turns of the episode done so far.

What a template can read (docs/eval-formats.md, "Turns that refer to earlier turns"):

* ``prev``: the turn just before this one (not in the first turn);
* ``turns``: the turns before this one, 0-based (``turns[0]`` is the first turn,
  ``turns[-1]`` is ``prev``);
* ``turn_N``: turn ``N`` counted from 1, as bat-cli and belt write it (``turn_1`` is
  ``turns[0]``);

and of each of them the fields of :data:`FIELDS`: ``output`` (the answer's text, as the
episode records it), ``reply_text`` (the same, belt's name), ``status`` (the status word
the turn ended with: ``completed``, ``input-required``, ...), ``input`` (the text
that was sent in that turn, itself rendered), and belt's two of a command-line agent's
turn: ``git_diff`` (what the turn changed in the workspace, as a diff; empty for an A2A
agent) and ``tool_sequence`` (the names of the tools called in the turn, in order:
printed as ``Read, Edit, Bash``, a list to ``join`` or loop over; empty when unknown).

The environment is Jinja2's ``ImmutableSandboxedEnvironment`` with ``StrictUndefined``
and no autoescaping: a template reads these values and nothing else (no Python
attribute beginning with ``_``, no globals such as ``range``), and a name or field it
does not have is an error, never an empty string. It renders under the limits of
:mod:`bat.evaluation.inputs.template_sandbox` (depth, size, loop steps, time). Jinja2 is
imported only when a dataset holds a templated turn.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

MARKERS = ("{{", "{%", "{#")
# The fields of an earlier turn a template can read (``reply_text`` is belt's name of
# ``output``).
FIELDS = ("output", "reply_text", "status", "input", "git_diff", "tool_sequence")
# Names Jinja gives a meaning of its own; ``self`` would hand the template itself out.
_SPECIAL_NAMES = ("self",)

_TURN_N = re.compile(r"turn_(\d+)")
_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_QUOTE_MAX = 80


def is_template(text: str) -> bool:
    """Whether ``text`` holds a template marker (otherwise it is sent as written)."""
    return "{" in text and ("{{" in text or "{%" in text or "{#" in text)


class TemplateProblem(ValueError):
    """A templated turn that cannot be rendered; the message names the turn (1-based)."""


class RenderError(Exception):
    """A checked template failed while it was rendered (a dynamic index out of range,
    a field read through a loop variable that does not exist, a limit reached)."""


def check_turns(turns: Sequence[Any]) -> None:
    """Raise :class:`TemplateProblem` for the first templated turn that is wrong.

    Non-text turns are skipped (their own validation reports them)."""
    for index, text in enumerate(turns):
        if isinstance(text, str) and is_template(text):
            problem = _problem(text, index)
            if problem is not None:
                raise TemplateProblem(f"turn {index + 1}: {problem}")


def compile_turns(turns: Sequence[str]) -> tuple[Any, ...] | None:
    """The compiled template of each turn (``None`` for a plain one), or ``None`` when
    every turn is plain. The turns must have passed :func:`check_turns`."""
    if not any(is_template(text) for text in turns):
        return None
    return tuple(_compiled(text) if is_template(text) else None for text in turns)


@functools.lru_cache(maxsize=1024)
def _compiled(text: str) -> Any:
    """The compiled template of ``text``; one that cannot compile (which the check
    should have refused) fails when it is rendered, as a :class:`RenderError`.

    Kept for the tasks that share a turn's text (a template is read-only once made)."""
    from jinja2 import TemplateError

    from bat.evaluation.inputs.template_sandbox import compile_checked, nesting_problem

    env = environment()
    problem = nesting_problem(env, text)
    if problem is not None:
        return _Broken(problem)
    try:
        return compile_checked(env, text)
    except TemplateError as exc:
        return _Broken(_one_line(exc))
    except (RecursionError, SyntaxError, MemoryError) as exc:  # Python's compiler
        return _Broken(f"the template cannot be compiled: {type(exc).__name__}")


class _Broken:
    """A template that did not compile: rendering it raises :class:`RenderError`."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def render(self, context: Any) -> str:
        raise RenderError(self.reason)


class ToolSequence(tuple):
    """The names of a turn's tool calls: a sequence to loop over or ``join``, printed
    whole as ``Read, Edit, Bash`` (not as Python writes a tuple)."""

    __slots__ = ()

    def __str__(self) -> str:
        return ", ".join(self)


class TurnView:
    """What a template sees of one earlier turn (only these attributes)."""

    __slots__ = FIELDS

    def __init__(
        self,
        output: str,
        status: str,
        input: str,
        git_diff: str = "",
        tool_sequence: Sequence[str] = (),
    ) -> None:
        self.output = output
        self.reply_text = output
        self.status = status
        self.input = input
        self.git_diff = git_diff
        self.tool_sequence = ToolSequence(tool_sequence)

    def __str__(self) -> str:
        """A turn printed whole (``{{ turns }}``, ``{{ turns|first }}``) is refused: it
        would print an object's address, different on every run, instead of a field."""
        from bat.evaluation.inputs.template_sandbox import TemplateLimit

        raise TemplateLimit("a turn is printed whole: print one of its fields (turns[0].output)")

    __repr__ = __str__


def render_turn(template: Any, done: Sequence[Any], budget: Any = None) -> str:
    """The text of a turn from its compiled ``template`` and the turns ``done`` so far
    (records with ``input``, ``status`` and ``output``, as the episode has them), within
    ``budget`` (a :class:`~bat.evaluation.inputs.template_sandbox.Budget`; a fresh one
    of the longest render time if None).

    Raises :class:`RenderError` with a one-line reason if the template fails or goes
    past a limit."""
    from jinja2 import TemplateError

    from bat.evaluation.inputs.template_sandbox import (
        MAX_RENDER_SECONDS,
        Budget,
        TemplateLimit,
        render,
    )

    if isinstance(template, _Broken):
        template.render(None)
    budget = budget or Budget(MAX_RENDER_SECONDS)

    views = [
        TurnView(
            record.output or "",
            record.status,
            record.input,
            getattr(record, "git_diff", None) or "",
            getattr(record, "tool_sequence", None) or (),
        )
        for record in done
    ]
    context: dict[str, Any] = {"turns": views}
    if views:
        context["prev"] = views[-1]
    context.update({f"turn_{number}": view for number, view in enumerate(views, 1)})
    try:
        text = render(template, context, budget)
    except (TemplateError, TemplateLimit) as exc:
        raise RenderError(_one_line(exc)) from None
    except MemoryError:  # a limit missed: the episode's failure, not a traceback
        raise RenderError("the template needed more memory than there is") from None
    except Exception as exc:  # any filter's own failure (truncate's assert, xmlattr's
        # AttributeError on a text): the template's, so its episode's failure
        raise RenderError(f"{type(exc).__name__}: {_one_line(exc)}") from None
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # "\ud800" made by the template: no JSON can hold it
            raise RenderError(
                "the template made text that is not Unicode (a lone surrogate, \\ud800)"
            ) from None
    return text


@functools.cache
def environment() -> Any:
    """The one sandboxed Jinja2 environment of turn templates, with its limits."""
    from bat.evaluation.inputs.template_sandbox import make_environment

    return make_environment()


@functools.lru_cache(maxsize=1024)
def _problem(text: str, index: int) -> str | None:
    """What is wrong with the template ``text`` of turn ``index`` (0-based), or None.

    Kept for the tasks that repeat a turn: parsing is pure Python (about 0.4 ms)."""
    from jinja2 import TemplateSyntaxError, meta, nodes

    from bat.evaluation.inputs.template_sandbox import nesting_problem

    env = environment()
    deep = nesting_problem(env, text)
    if deep is not None:
        return deep
    try:
        tree = env.parse(text)
    except TemplateSyntaxError as exc:
        where = f" (line {exc.lineno})" if text.count("\n") and exc.lineno else ""
        return f"template syntax error{where}: {_one_line(exc.message or str(exc))}"
    except RecursionError:  # a shape the depth scan does not know: refused all the same
        return "template nested too deep for the parser"
    problem = _refused(text, tree)
    if problem is not None:
        return problem

    for node in tree.find_all((nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)):
        return f"template syntax error (line {node.lineno}): a turn cannot load other templates"
    for node in tree.find_all((nodes.Filter, nodes.Test)):
        if isinstance(node, nodes.Filter) and node.name in _REFUSED_FILTERS:
            return f"{_quote(text, node.name)}: {_REFUSED_FILTERS[node.name]}"
        known = env.filters if isinstance(node, nodes.Filter) else env.tests
        if node.name not in known:
            kind = "filter" if isinstance(node, nodes.Filter) else "test"
            return f"{_quote(text, node.name)}: there is no {kind} named {node.name!r}"
    # Attributes beginning with '_' are Python's insides ('{{ "".__class__ }}').
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        name = node.attr if isinstance(node, nodes.Getattr) else _const(node.arg)
        if isinstance(name, str) and name.startswith("_"):
            return (
                f"{_quote(text, name)}: {name!r} is not allowed "
                "(a template reads fields of earlier turns only)"
            )

    for name in sorted(meta.find_undeclared_variables(tree)):
        problem = _variable_problem(name, index)
        if problem is not None:
            return f"{_quote(text, name)} {problem}"

    # Loop variables over ``turns`` are turns too: ``{% for t in turns %}{{ t.output }}``.
    loop_names = {
        node.target.name
        for node in tree.find_all(nodes.For)
        if isinstance(node.target, nodes.Name) and _is_name(node.iter, "turns")
    }
    based: set[int] = set()  # ids of turn references that are read a field of
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getitem) and _is_name(node.node, "turns"):
            problem = _index_problem(node.arg, index)
            if problem is not None:
                return f"{_quote(text, 'turns')} {problem}"
            continue
        if not _is_turn(node.node, loop_names):
            continue
        based.add(id(node.node))
        field = node.attr if isinstance(node, nodes.Getattr) else _const(node.arg)
        if field not in FIELDS:
            shown = field if isinstance(field, str) else "[...]"
            root = _root(node.node)
            return (
                f"{_quote(text, f'{root}.{shown}', root)}: unknown field {shown!r} "
                f"(a turn has {', '.join(FIELDS)})"
            )
    for node in tree.find_all((nodes.Name, nodes.Getitem)):
        stored = isinstance(node, nodes.Name) and node.ctx == "store"  # a loop's target
        if _is_turn(node, loop_names) and id(node) not in based and not stored:
            root = _root(node)
            return f"{_quote(text, root)}: {root} is a turn; name one of its fields ({root}.output)"
    broken = _compiled(text)  # Python's own compiler has limits too: found now, not later
    if isinstance(broken, _Broken):
        return f"template cannot be compiled: {broken.reason}"
    return None


_REFUSED_FILTERS = {
    "attr": "the filter 'attr' is not allowed (a template reads fields with a dot: prev.output)",
    "urlize": "the filter 'urlize' is not allowed in a turn template",
    "tojson": "the filter 'tojson' is not allowed in a turn template",
}


def _refused(text: str, tree: Any) -> str | None:
    """What a template may not use whatever its names: ``self`` (the template itself), a
    loop that calls itself (``recursive``), an ``attribute=`` beginning with ``_``."""
    from jinja2 import nodes

    for node in tree.find_all(nodes.Name):
        if node.name in _SPECIAL_NAMES:
            return f"{_quote(text, node.name)}: {node.name!r} is not allowed"
    for node in tree.find_all(nodes.For):
        if node.recursive:
            return f"{_quote(text, 'recursive')}: a recursive loop is not allowed"
    for node in tree.find_all(nodes.Keyword):
        value = _const(node.value)
        if node.key == "attribute" and isinstance(value, str) and _private(value):
            return (
                f"{_quote(text, value)}: {value!r} is not allowed "
                "(a template reads fields of earlier turns only)"
            )
    return None


def _private(path: str) -> bool:
    """Whether an attribute path (``a.b``, as ``map(attribute=...)`` takes it) reaches a
    name beginning with ``_``."""
    return any(part.startswith("_") for part in path.split("."))


def _variable_problem(name: str, index: int) -> str | None:
    if name == "turns":
        return None
    if name == "prev":
        return (
            "refers to the turn before the first one (prev needs an earlier turn)"
            if not index
            else None
        )
    match = _TURN_N.fullmatch(name)
    if match and int(match[1]) >= 1:
        number = int(match[1])
        if number == index + 1:
            return "refers to this turn itself (a turn can use the turns before it)"
        if number > index + 1:
            return "refers to a later turn (a turn can use the turns before it)"
        return None
    return f"uses an unknown variable {name!r} (a turn can use prev, turns[i] and turn_N, N from 1)"


def _index_problem(arg: Any, index: int) -> str | None:
    """What is wrong with ``turns[arg]`` in turn ``index`` (0-based), or None."""
    from jinja2 import nodes

    value = _const(arg)
    if isinstance(arg, nodes.Neg) and isinstance(_const(arg.node), int):
        value = -_const(arg.node)
    if value is None or isinstance(arg, nodes.Slice):
        return None  # computed at render time
    if not isinstance(value, int) or isinstance(value, bool):
        return "takes a number: turns[0] is the first turn"
    if value == index:
        return "refers to this turn itself (turns[0] is the first turn)"
    if value > index:
        return "refers to a later turn (turns[0] is the first turn)"
    if value < 0 and -value > index:
        return "refers to a turn before the first one"
    return None


def _const(node: Any) -> Any:
    from jinja2 import nodes

    return node.value if isinstance(node, nodes.Const) else None


def _is_name(node: Any, name: str) -> bool:
    from jinja2 import nodes

    return isinstance(node, nodes.Name) and node.name == name


def _is_turn(node: Any, loop_names: set[str]) -> bool:
    """Whether ``node`` stands for one earlier turn: ``prev``, ``turn_N``, ``turns[i]``
    or a loop variable over ``turns``."""
    from jinja2 import nodes

    if isinstance(node, nodes.Getitem):
        return _is_name(node.node, "turns") and not isinstance(node.arg, nodes.Slice)
    if isinstance(node, nodes.Name):
        return node.name == "prev" or node.name in loop_names or bool(_TURN_N.fullmatch(node.name))
    return False


def _root(node: Any) -> str:
    from jinja2 import nodes

    return "turns[...]" if isinstance(node, nodes.Getitem) else node.name


def _quote(text: str, *needles: str) -> str:
    """The first tag of ``text`` that holds a needle (tried in order), quoted; the whole
    text if none does."""
    for needle in needles:
        if needle.startswith("turns[...]"):
            needle = "turns"
        word = re.escape(needle)
        pattern = re.compile(rf"(?<![\w.]){word}(?!\w)" if needle[:1].isalpha() else word)
        for match in _TAG.finditer(text):
            if pattern.search(match.group()):
                return repr(_short(match.group()))
    return repr(_short(text))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _QUOTE_MAX else text[: _QUOTE_MAX - 1] + "…"


def _one_line(exc: Any) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
