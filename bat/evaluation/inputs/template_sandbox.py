"""The box a turn template renders in: Jinja2's sandbox with limits on size, time and depth.

Jinja2's ``ImmutableSandboxedEnvironment`` keeps a template away from Python's insides
but bounds nothing: ``{{ 'x'.ljust(999999999) }}`` takes a gigabyte, two nested loops
over a long string never end, 500 parentheses overflow the parser's stack. This module
adds the limits (docs/security.md, "Turn templates"):

* **depth**, before Jinja parses: :func:`nesting_problem` scans the tokens of the
  template (Jinja's lexer does not recurse) for brackets and block tags nested deeper
  than :data:`MAX_NESTING`, and for a tag longer than :data:`MAX_TAG_TOKENS` tokens (a
  chain of ``not``, ``+`` or filters is a deep tree too);
* **size**: every operation that can make a value larger than its inputs (``*``,
  ``+``, ``~``, ``%``, ``str.format``, the padding methods and filters, ``replace``,
  ``join``, ``indent``, ``wordwrap``, a list written in the template) checks the size of
  what it would make *before* making it: at most :data:`MAX_VALUE_CHARS` characters (a
  list counts as printed). What all of them and every output tag make in one render is
  counted too, against :data:`MAX_MADE_CHARS`, and the text of the turn is at most
  :data:`MAX_OUTPUT_CHARS`;
* **work**: loops (:data:`MAX_LOOP_ITERATIONS` iterations in all), calls and outputs
  look at the clock (:data:`MAX_RENDER_SECONDS`, or the turn timeout if shorter) and at
  a stop flag, which the episode sets when it is cancelled (Ctrl-C): rendering runs in a
  worker thread, so the main thread keeps handling signals.

A limit that is hit raises :class:`TemplateLimit`, which the caller turns into the
episode's ``template`` infrastructure failure. Imported only when a dataset holds a
templated turn (it imports Jinja2).
"""

from __future__ import annotations

import contextvars
import re
import threading
import time
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from jinja2 import StrictUndefined, nodes
from jinja2.filters import FILTERS, make_attrgetter
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter, SecurityError
from jinja2.utils import pass_environment

from bat.figures import integer

MAX_NESTING = 20
MAX_TAG_TOKENS = 200
MAX_VALUE_CHARS = 1_000_000
MAX_MADE_CHARS = 10_000_000
MAX_OUTPUT_CHARS = 1_000_000
MAX_LOOP_ITERATIONS = 100_000
MAX_RENDER_SECONDS = 2.0
MAX_PIECES = 10_000
MAX_EXPONENT = 64
MAX_INT_BITS = 10_000

# Block tags that hold a body up to their ``end`` tag (``set`` only in its block form).
_BODY_TAGS = frozenset(
    {"for", "if", "macro", "call", "filter", "with", "block", "autoescape", "trans", "set"}
)
_OPEN = frozenset("([{")
_CLOSE = frozenset(")]}")
# Methods of str, list, dict and numbers a template may call: the ones that make at most
# a few times their input. The padding ones and replace/join are checked first; any
# other built-in method (translate, encode, to_bytes, ...) is refused.
_PLAIN_METHODS = frozenset(
    [
        "capitalize",
        "casefold",
        "count",
        "endswith",
        "find",
        "index",
        "isalnum",
        "isalpha",
        "isascii",
        "isdecimal",
        "isdigit",
        "isidentifier",
        "islower",
        "isnumeric",
        "isprintable",
        "isspace",
        "istitle",
        "isupper",
        "lower",
        "lstrip",
        "partition",
        "removeprefix",
        "removesuffix",
        "rfind",
        "rindex",
        "rpartition",
        "rsplit",
        "rstrip",
        "split",
        "splitlines",
        "startswith",
        "strip",
        "swapcase",
        "title",
        "upper",
        "items",
        "keys",
        "values",
        "get",
        "is_integer",
        "bit_length",
    ]
)
_WIDTH_METHODS = frozenset({"ljust", "rjust", "center", "zfill"})
_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_PERCENT = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?(?P<flags>[#0\- +]*)(?P<width>\*|\d+)?"
    r"(?:\.(?P<precision>\*|\d+))?[hlL]?(?P<kind>.?)",
    re.DOTALL,
)


class TemplateLimit(Exception):
    """A template went past one of the limits of this module; the message says which."""


class Budget:
    """What one render may still spend: its deadline, loop iterations and characters.

    ``stop`` is set from outside (the episode was cancelled) and ends the render at its
    next loop step, call or output."""

    def __init__(self, seconds: float, stop: threading.Event | None = None) -> None:
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.stop = stop or threading.Event()
        self.iterations = 0
        self.made = 0

    def tick(self) -> None:
        if self.stop.is_set():
            raise TemplateLimit("rendering was stopped (the run is ending)")
        if time.monotonic() > self.deadline:
            raise TemplateLimit(f"rendering took longer than {self.seconds:g} s")

    def step(self) -> None:
        self.iterations += 1
        if self.iterations > MAX_LOOP_ITERATIONS:
            raise TemplateLimit(f"loops ran more than {integer(MAX_LOOP_ITERATIONS)} times in all")
        self.tick()

    def charge(self, chars: int) -> None:
        self.made += chars
        if self.made > MAX_MADE_CHARS:
            raise TemplateLimit(
                f"the template made more than {integer(MAX_MADE_CHARS)} characters in all"
            )


_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar(
    "bat_template_budget", default=None
)


def _budget() -> Budget:
    """The budget of the render under way; a fresh one outside a render (a template
    used without :func:`render`, as a test may)."""
    return _BUDGET.get() or Budget(MAX_RENDER_SECONDS)


def render(template: Any, context: dict[str, Any], budget: Budget) -> str:
    """The text of ``template`` rendered from ``context`` within ``budget``."""
    token = _BUDGET.set(budget)
    try:
        pieces: list[str] = []
        total = 0
        for piece in template.generate(context):
            total += len(piece)
            if total > MAX_OUTPUT_CHARS:
                raise TemplateLimit(
                    f"the turn is longer than {integer(MAX_OUTPUT_CHARS)} characters"
                )
            pieces.append(piece)
            budget.tick()
        return "".join(pieces)
    finally:
        _BUDGET.reset(token)


# -- sizes -----------------------------------------------------------------------------


def _check(size: int, what: str) -> None:
    """Refuse to make a value of ``size`` characters (or items) if it is too large."""
    if size > MAX_VALUE_CHARS:
        raise TemplateLimit(f"{what} would make more than {integer(MAX_VALUE_CHARS)} characters")


def _made(size: int, what: str) -> None:
    """:func:`_check`, and count what is made against the render's budget."""
    _check(size, what)
    _budget().charge(max(size, 0))


def _field_size(value: Any, width: int, precision: int, kind: str = "") -> int:
    """At most how long one formatted field is: a number is short, a repr up to ten
    characters a character."""
    size = printed_size(value) * (10 if kind in ("r", "a") else 1)
    return max(width, size + precision + 320)


def _whole(number: str | None) -> int:
    """A width or precision written in a format: at most 7 digits and the value limit."""
    if number is None:
        return 0
    if len(number) > 7 or int(number) > MAX_VALUE_CHARS:
        raise TemplateLimit(f"a width above {integer(MAX_VALUE_CHARS)} is not allowed")
    return int(number)


def printed_size(value: Any, limit: int = MAX_VALUE_CHARS) -> int:
    """An upper bound of ``len(str(value))``, found without making that text; stops
    counting past ``limit``. A list of 1,000 references to one long string is short in
    memory and a gigabyte printed."""
    seen: dict[int, int] = {}
    return _printed(value, limit, seen, 0)


def _printed(value: Any, limit: int, seen: dict[int, int], depth: int) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, bool | float | types.NoneType):
        return 32
    if isinstance(value, int):
        return value.bit_length() // 3 + 2
    if not isinstance(value, list | tuple | dict | set | frozenset):
        return 64  # a turn's view, a macro, an undefined: printed short
    if id(value) in seen:
        return seen[id(value)]
    if depth > 50:
        raise TemplateLimit("a value is nested more than 50 levels deep")
    items = value.items() if isinstance(value, dict) else ((item,) for item in value)
    total = 2
    for pair in items:
        for item in pair:
            total += (
                _repr_size(item)
                if isinstance(item, str)
                else _printed(item, limit, seen, depth + 1)
            ) + 2
        if total > limit:
            break
    seen[id(value)] = total
    return total


def _repr_size(text: str) -> int:
    """At most how long ``repr(text)`` is (a string inside a list prints so): a
    backslash or quote doubles, a character that is not printable takes up to ten."""
    if text.isprintable():
        return len(text) + text.count("\\") + text.count("'") + 2
    return 10 * len(text) + 2


def _text(value: Any) -> str:
    """``str(value)``, once its printed size is known to be within the limit."""
    if not isinstance(value, str):
        _made(printed_size(value), "printing a value")
        return str(value)
    return value


def _check_number(number: Any, what: str) -> None:
    if isinstance(number, int) and number > MAX_VALUE_CHARS:
        raise TemplateLimit(f"{what} above {integer(MAX_VALUE_CHARS)} is not allowed")


# -- the operations that grow ----------------------------------------------------------


def repeat(left: Any, right: Any) -> Any:
    """``left * right``: a text or list repeated, or a product of whole numbers."""
    for seq, times in ((left, right), (right, left)):
        if isinstance(seq, str | list | tuple) and isinstance(times, int):
            _made(printed_size(seq) * max(times, 0), "a repetition")
            return left * right
    if isinstance(left, int) and isinstance(right, int):
        _bits(left.bit_length() + right.bit_length())
    return left * right


def add(left: Any, right: Any) -> Any:
    """``left + right``: texts and lists joined are checked, numbers added."""
    if isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
        _made(printed_size(left) + printed_size(right), "joining two values with +")
    return left + right


def power(left: Any, right: Any) -> Any:
    """``left ** right``: Jinja would fold ``9 ** 9 ** 9`` forever."""
    if isinstance(right, int | float) and abs(right) > MAX_EXPONENT:
        raise TemplateLimit(f"an exponent above {MAX_EXPONENT} is not allowed")
    if isinstance(left, int) and isinstance(right, int) and right > 0:
        _bits(left.bit_length() * right)
    return left**right


def _bits(bits: int) -> None:
    if bits > MAX_INT_BITS:
        raise TemplateLimit(f"a number of more than {integer(MAX_INT_BITS)} bits is not allowed")


def concat(*values: Any) -> str:
    """``a ~ b ~ c``: the texts joined, once their sum is known to be within the limit."""
    _made(sum(printed_size(value) for value in values), "joining with ~")
    return "".join(map(str, values))


def percent(form: Any, args: Any) -> Any:
    """``form % args``: printf-style formatting done one conversion at a time, so that
    ``'%0999999999d'`` or a thousand ``%s`` of a long text are refused before they are
    made. Not a text on the left: Python's ``%`` (a remainder)."""
    if not isinstance(form, str):
        return form % args
    positional = args if isinstance(args, tuple) else (args,)
    mapping = args if isinstance(args, Mapping) else None
    used, out, total, start = 0, [], 0, 0
    for match in _PERCENT.finditer(form):
        literal, spec, start = form[start : match.start()], match.group(0), match.end()
        if match["kind"] == "%" and match["key"] is None:
            piece = spec % ()
        else:
            if "*" in (match["width"] or "", match["precision"] or ""):
                raise TemplateLimit("a '*' width in % formatting is not allowed")
            width, precision = _whole(match["width"]), _whole(match["precision"])
            if match["key"] is not None:
                if mapping is None:
                    raise TypeError("format requires a mapping")
                value = mapping[match["key"]]
                spec = spec.replace(f"({match['key']})", "", 1)
            elif used < len(positional):
                value, used = positional[used], used + 1
            else:
                raise TypeError("not enough arguments for format string")
            _check(total + _field_size(value, width, precision, match["kind"]), "% formatting")
            piece = spec % (value,)
        out += [literal, piece]
        total += len(literal) + len(piece)
    out.append(form[start:])
    if mapping is None and used < len(positional):
        raise TypeError("not all arguments converted during string formatting")
    _budget().charge(total)
    return "".join(out)


def _width_method(method: Any, args: tuple[Any, ...]) -> None:
    """Check a padding method (``'x'.ljust(n)``, ``center``, ``zfill``) before the call."""
    width = args[0] if args else 0
    if isinstance(width, int):
        _check_number(width, f"a width for {method.__name__}()")
        _made(max(width, len(method.__self__)), f"{method.__name__}()")


def _replace_size(text: str, old: str, new: str, count: Any = -1) -> int:
    found = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    return len(text) + found * (len(new) - len(old))


def _checked_method(method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse a built-in method that could make a value too large (or is not known)."""
    owner = method.__self__
    name = method.__name__
    if isinstance(owner, types.ModuleType) or name in _PLAIN_METHODS:
        return
    if isinstance(owner, str) and name in _WIDTH_METHODS:
        _width_method(method, args)
    elif isinstance(owner, str) and name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        _check_number(size, "a tab size")
        _made(len(owner) + owner.count("\t") * max(int(size), 0), "expandtabs()")
    elif isinstance(owner, str) and name == "replace" and len(args) >= 2:
        if isinstance(args[0], str) and isinstance(args[1], str):
            _made(_replace_size(owner, *args), "replace()")
    elif isinstance(owner, str) and name == "join":
        return  # joined by join_method, which checks the size
    else:
        raise SecurityError(f"calling {type(owner).__name__}.{name}() is not allowed")


def join_method(separator: str, items: Iterable[Any]) -> str:
    """``sep.join(items)`` with the size checked first."""
    items = list(items)
    _made(sum(printed_size(item) for item in items) + len(separator) * len(items), "join()")
    return separator.join(items)


# -- filters that grow, replaced ---------------------------------------------------------


def _center(value: Any, width: int = 80) -> str:
    text = _text(value)
    _check_number(width, "a width for center")
    _made(max(width, len(text)), "center")
    return text.center(width)


def _indent(value: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    text = _text(value)
    pad = width if isinstance(width, str) else " " * _width(width)
    lines = sum(text.count(brk) for brk in _LINE_BREAKS) + 1
    _made(len(text) + lines * len(pad), "indent")
    return FILTERS["indent"](text, width, first, blank)


def _width(width: Any) -> int:
    _check_number(width, "an indent width")
    return int(width)


def _replace(eval_ctx: Any, value: Any, old: Any, new: Any, count: Any = None) -> str:
    text, old, new = _text(value), _text(old), _text(new)
    _made(_replace_size(text, old, new, -1 if count is None else count), "replace")
    return FILTERS["replace"](eval_ctx, text, old, new, count)


def _join(eval_ctx: Any, value: Iterable[Any], d: str = "", attribute: Any = None) -> str:
    items = list(value)
    if attribute is not None:
        items = list(map(make_attrgetter(eval_ctx.environment, attribute), items))
    separator = _text(d)
    _made(sum(map(printed_size, items)) + len(separator) * len(items), "join")
    return separator.join(map(str, items))


def _format(value: Any, *args: Any, **kwargs: Any) -> str:
    if args and kwargs:
        raise TypeError("can't handle positional and keyword arguments at the same time")
    return percent(_text(value), kwargs or args)


def _wordwrap(environment: Any, s: Any, width: int = 79, *rest: Any, **kwargs: Any) -> str:
    text = _text(s)
    wrap = kwargs.get("wrapstring") or (rest[1] if len(rest) > 1 else None)
    lines = len(text) // max(int(width), 1) + text.count(" ") + 2
    _made(len(text) + lines * len(wrap or environment.newline_sequence), "wordwrap")
    return FILTERS["wordwrap"](environment, text, width, *rest, **kwargs)


def _pieces(count: Any, fill: Any, what: str) -> None:
    if isinstance(count, int) and count > MAX_PIECES:
        raise TemplateLimit(f"{what} by more than {integer(MAX_PIECES)} is not allowed")
    if fill is not None and isinstance(count, int):
        _made(printed_size(fill) * count, what)


def _batch(value: Any, linecount: int, fill_with: Any = None) -> Iterator[list[Any]]:
    _pieces(linecount, fill_with, "batch")
    return FILTERS["batch"](value, linecount, fill_with)


def _slice(value: Any, slices: int, fill_with: Any = None) -> Iterator[list[Any]]:
    _pieces(slices, fill_with, "slice")
    return FILTERS["slice"](value, slices, fill_with)


def _sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    if not isinstance(start, int | float):
        raise TemplateLimit("sum adds numbers (a start value that is not a number is not allowed)")
    return FILTERS["sum"](environment, iterable, attribute, start)


def _filters() -> dict[str, Any]:
    """Jinja's filters, the growing ones replaced by checked ones; ``attr`` (reads any
    attribute by a computed name), ``urlize`` and ``tojson`` (unbounded options) are
    left out."""
    from jinja2.utils import pass_eval_context

    filters = {name: f for name, f in FILTERS.items() if name not in ("attr", "urlize", "tojson")}
    filters.update(
        center=_center,
        indent=_indent,
        replace=pass_eval_context(_replace),
        join=pass_eval_context(_join),
        format=_format,
        wordwrap=pass_environment(_wordwrap),
        batch=_batch,
        slice=_slice,
        sum=pass_environment(_sum),
    )
    return filters


# -- the environment -------------------------------------------------------------------


class _BoundedFormatter(SandboxedFormatter):
    """``str.format`` of the sandbox, with each field's width and the total checked."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.total = 0

    def format_field(self, value: Any, format_spec: str) -> Any:
        numbers = [_whole(number) for number in re.findall(r"\d+", format_spec)]
        size = _field_size(value, max(numbers, default=0), sum(numbers))
        _check(self.total + size, "format()")
        self.total += size
        _budget().charge(size)
        return super().format_field(value, format_spec)


class TurnEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox with this module's checks in its hooks."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _budget().tick()
        if operator == "*":
            return repeat(left, right)
        if operator == "**":
            return power(left, right)
        if operator == "+":
            return add(left, right)
        return percent(left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _budget().tick()
        if isinstance(__obj, types.BuiltinMethodType) and __obj.__self__ is not None:
            _checked_method(__obj, args, kwargs)
            if isinstance(__obj.__self__, str) and __obj.__name__ == "join":
                return join_method(__obj.__self__, *args, **kwargs)
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Any:
        if not isinstance(value, types.BuiltinMethodType) or value.__name__ not in (
            "format",
            "format_map",
        ):
            return None
        text = value.__self__
        if not isinstance(text, str):
            return None
        is_map = value.__name__ == "format_map"

        def bounded(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                args, kwargs = (), args[0]
            return str(_BoundedFormatter(self).vformat(text, args, kwargs))

        return bounded

    def bat_loop(self, iterable: Any) -> Iterator[Any]:
        """What a ``for`` loop goes over: each step counted and timed."""
        budget = _budget()
        for item in iterable:
            budget.step()
            yield item

    def bat_list(self, value: Any) -> Any:
        """A list, tuple or dict written in the template, its printed size checked."""
        _made(printed_size(value), "a list")
        return value

    def bat_concat(self, *values: Any) -> str:
        return concat(*values)


def _finalize(value: Any) -> Any:
    """Every output tag: its printed size counted against the render's budget (a
    macro's text counts where it is made and again where it is used)."""
    budget = _BUDGET.get()
    if budget is None:  # a constant, folded while compiling
        return value
    budget.tick()
    text = _text(value)
    budget.charge(len(text))
    return text


def make_environment() -> TurnEnvironment:
    env = TurnEnvironment(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        finalize=_finalize,
        optimized=False,  # nothing of the template runs while it is compiled
    )
    env.globals.clear()  # range, dict, lipsum, cycler, joiner, namespace: none needed
    env.filters = _filters()
    return env


def compile_checked(env: TurnEnvironment, text: str) -> Any:
    """The template of ``text`` with loops counted and ``~`` and literal lists checked."""
    tree = env.parse(text)
    bound(tree)
    return env.template_class.from_code(env, env.compile(tree), env.make_globals(None), None)


def bound(tree: Any) -> None:
    """Rewrite ``tree`` in place: a loop's iterable goes through ``bat_loop``, ``a ~ b``
    becomes ``bat_concat(a, b)`` and a list written in the template ``bat_list(...)``.
    Walks with a stack (the tree's depth was bounded, not its width); a wrapper made
    here is not walked again, only what it wraps."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, nodes.For):
            stack.append(node.iter)
            node.iter = _env_call("bat_loop", [node.iter])
        for field in node.fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                stack.extend(item for item in value if isinstance(item, nodes.Node))
                value[:] = [_rewritten(item) for item in value]
            elif isinstance(value, nodes.Node) and not (
                field == "iter" and isinstance(node, nodes.For)
            ):
                stack.append(value)
                setattr(node, field, _rewritten(value))


def _rewritten(node: Any) -> Any:
    if isinstance(node, nodes.Concat):
        return _env_call("bat_concat", node.nodes)
    if isinstance(node, nodes.List | nodes.Dict) or (
        isinstance(node, nodes.Tuple) and node.ctx == "load"
    ):
        return _env_call("bat_list", [node])
    return node


def _env_call(name: str, args: list[Any]) -> Any:
    lineno = args[0].lineno if args else 1
    call = nodes.Call(nodes.EnvironmentAttribute(name), args, [], None, None, lineno=lineno)
    for child in [call, call.node]:
        child.lineno = lineno
        child.environment = None
    return call


# -- depth, before parsing -------------------------------------------------------------


def nesting_problem(env: TurnEnvironment, text: str) -> str | None:
    """What makes ``text`` too deep for Jinja's parser, or None; found from the tokens,
    which Jinja's lexer makes without recursion."""
    from jinja2 import TemplateSyntaxError

    blocks = brackets = deepest = in_tag = 0
    first_name: str | None = None
    tag_is_block = assigns = False
    try:
        for lineno, kind, value in env.lex(text):
            if kind in ("block_begin", "variable_begin"):
                in_tag, first_name, tag_is_block, assigns = 0, None, kind == "block_begin", False
                continue
            if kind in ("block_end", "variable_end"):
                if tag_is_block and first_name is not None:
                    if first_name.startswith("end") and first_name[3:] in _BODY_TAGS:
                        blocks -= 1
                    elif first_name in _BODY_TAGS and not (first_name == "set" and assigns):
                        blocks += 1
                brackets = 0
                continue
            in_tag += 1
            if in_tag > MAX_TAG_TOKENS:
                return (
                    f"template too long (line {lineno}): a tag of more than "
                    f"{MAX_TAG_TOKENS} tokens is not allowed"
                )
            if kind == "name" and first_name is None:
                first_name = value
            elif kind == "operator":
                brackets += value in _OPEN
                brackets -= value in _CLOSE
                assigns = assigns or value == "="
            deepest = max(deepest, blocks + brackets)
            if deepest > MAX_NESTING:
                return (
                    f"template nested too deep (line {lineno}): more than {MAX_NESTING} "
                    "levels of brackets and blocks are not allowed"
                )
    except TemplateSyntaxError:
        return None  # the parser says it better
    return None
