"""Tools: Mastra's createTool() fields, declared in Python.

    @berth.tool(id="weather-tool", description="Get the weather",
                input_schema={"type": "object", ...})
    async def weather(input, ctx):
        return {"location": input["location"], ...}

or ``berth.Tool("weather-tool", weather, input_schema=...)``. The fields
are createTool()'s in snake_case (docs/WORKERS.md's Definition lists their
JSON names). Schemas are JSON Schema dicts, or pydantic model classes when
pydantic is installed: the schema is the model's JSON Schema, ``execute``
gets the input (and ``ctx.resume_data``) as a model instance, and a model
returned (or suspended with, or checkpointed) is sent as its JSON.

Every function field may be a plain or an async function; plain ones run
in a thread so that they never hold up the event loop. Each field is
checked when the Tool is made, so that a misspelt stage or a schema of the
wrong type stops the program at import rather than at registration.
"""
from __future__ import annotations

import dataclasses
import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Mapping

from .client import Duration, ms

__all__ = ["Tool", "tool", "Background", "Transform", "STAGES"]

#: The stages a transform may be declared for (docs/WORKERS.md): the stages
#: of Mastra's transform that berth has (``inputDelta`` has no source in a
#: daemon).
STAGES = ("input", "output", "error", "approval", "suspend", "resume")
_TARGETS = ("display", "transcript")
_BACKGROUND_KEYS = ("enabled", "timeoutMs", "maxRetries", "concurrency",
                    "backoffMs", "backoffMaxMs", "onInterrupt", "retries")
#: berth's field for a name a port often brings (berthd says the same).
_BERTH_NAMES = {
    "retryDelay": "backoffMs (ms), or Mastra's retries.retryDelayMs",
    "retryDelayMs": "retries.retryDelayMs (Mastra's RetryConfig), or "
                    "backoffMs",
    "maxRetryDelay": "backoffMaxMs (ms), or Mastra's retries.maxRetryDelayMs",
    "maxRetryDelayMs": "retries.maxRetryDelayMs (Mastra's RetryConfig), or "
                       "backoffMaxMs",
    "maxRetry": "maxRetries", "retry": "maxRetries",
    "timeout": "timeoutMs (ms)",
}
_MCP_KEYS = ("annotations", "_meta")


@dataclass(frozen=True)
class Background:
    """A tool's background settings; durations in seconds (the wire's
    ``timeoutMs`` is ``timeout``). A dict with the wire's camelCase names
    works too."""
    enabled: bool | None = None
    timeout: Duration | None = None
    max_retries: int | None = None
    concurrency: int | None = None
    backoff: Duration | None = None
    backoff_max: Duration | None = None
    on_interrupt: Literal["retry", "fail"] | None = None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.enabled is not None:
            out["enabled"] = _bool(self.enabled, "background.enabled")
        for key, value, name in (
                ("timeoutMs", self.timeout, "background.timeout"),
                ("backoffMs", self.backoff, "background.backoff"),
                ("backoffMaxMs", self.backoff_max, "background.backoff_max")):
            if value is not None:
                n = ms(value, name)
                if n == 0:
                    # berthd takes 0 ms for "not given": the tool would
                    # get berthd's default, not what was asked for.
                    raise ValueError("%s must be at least 0.001 s (berthd "
                                     "counts whole milliseconds, and takes "
                                     "0 for its default), not %r"
                                     % (name, value))
                out[key] = n
        for key, value, name in (
                ("maxRetries", self.max_retries, "background.max_retries"),
                ("concurrency", self.concurrency, "background.concurrency")):
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) \
                        or value < 0:
                    raise ValueError("%s must be an integer >= 0, not %r"
                                     % (name, value))
                out[key] = value
        if self.on_interrupt is not None:
            if self.on_interrupt not in ("retry", "fail"):
                raise ValueError("background.on_interrupt must be 'retry' "
                                 "or 'fail', not %r" % (self.on_interrupt,))
            out["onInterrupt"] = self.on_interrupt
        return out


@dataclass(frozen=True)
class Transform:
    """``transform``: per target (``display``, ``transcript``) a function
    per stage. Each function takes a :class:`~berth.TransformContext` and
    returns the view; a dict ``{"display": {...}, "transcript": {...}}``
    works too."""
    display: Mapping[str, Callable[..., Any]] = dataclasses.field(
        default_factory=dict)
    transcript: Mapping[str, Callable[..., Any]] = dataclasses.field(
        default_factory=dict)


def _check_background_wire(bg: Mapping[str, Any], where: str) -> None:
    """Checks the values of a background dict in the wire's names, as
    :class:`Background` checks its own, so that a bad one is refused when
    the Tool is made rather than at registration."""
    for key, value in bg.items():
        name = where + "background[%r]" % key
        if key == "enabled":
            _bool(value, name)
        elif key == "retries":
            # Mastra's RetryConfig: berthd reads it into berth's fields
            # and refuses what it cannot (docs/TOOLS.md).
            if not isinstance(value, Mapping):
                raise TypeError("%s must be a dict (Mastra's RetryConfig: "
                                "maxRetries, retryDelayMs, maxRetryDelayMs, "
                                "backoffMultiplier), not %r" % (name, value))
        elif key == "onInterrupt":
            if value not in ("retry", "fail"):
                raise ValueError("%s must be 'retry' or 'fail', not %r"
                                 % (name, value))
        elif isinstance(value, bool) or not isinstance(value, int) \
                or value < 0:
            raise ValueError("%s must be an integer >= 0%s, not %r"
                             % (name, " (milliseconds)"
                                if key.endswith("Ms") else "", value))


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError("%s must be True or False, not %r" % (name, value))
    return value


def _is_async(fn: Callable) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None))


def _arity(fn: Callable, name: str) -> int:
    """How many positional arguments fn takes (a large number for
    *args)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return 2  # a builtin without a signature: give it everything
    n = 0
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            return 1 << 30
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            n += 1
        elif p.kind is p.KEYWORD_ONLY and p.default is p.empty:
            raise TypeError("%s has a keyword-only parameter %r without a "
                            "default, which berth cannot fill"
                            % (name, p.name))
    return n


@dataclass(frozen=True)
class _Fn:
    """A user function, with what calling it needs known in advance."""
    fn: Callable[..., Any]
    is_async: bool
    nargs: int
    name: str

    @classmethod
    def of(cls, fn: Any, name: str, max_args: int) -> "_Fn":
        if not callable(fn):
            raise TypeError("%s must be a function, not %r" % (name, fn))
        return cls(fn, _is_async(fn), min(_arity(fn, name), max_args), name)


# ---- schemas ------------------------------------------------------------------

def _pydantic_model(value: Any) -> Any:
    """The pydantic BaseModel subclass value is, or None (pydantic is
    imported only by a program that uses it)."""
    pyd = sys.modules.get("pydantic")
    if pyd is None or not isinstance(value, type):
        return None
    base = getattr(pyd, "BaseModel", None)
    if base is not None and issubclass(value, base):
        return value
    v1 = sys.modules.get("pydantic.v1")
    if v1 is not None and issubclass(value, v1.BaseModel):
        return value
    return None


def _v1_nullable(model: Any, node: dict, root: dict, seen: set) -> None:
    """pydantic 1's schema() leaves null out of an Optional field, so that
    the None the model takes and gives (an output of None, a null input)
    failed its own schema in berthd. This lets null in wherever a field
    of model (node its schema in root) allows None, its items and values
    and the models under it too, as pydantic 2's schema does."""
    if model in seen:
        return
    seen.add(model)
    props = node.get("properties") or {}
    for field in model.__fields__.values():
        name = field.alias
        if name in props:
            props[name] = _v1_field(field, props[name], root, seen)


def _v1_field(field: Any, sub: Any, root: dict, seen: set) -> Any:
    """The schema sub of a pydantic 1 ModelField, null let in where the
    field, or the field of its items or values, allows None."""
    if not isinstance(sub, dict):
        return sub
    inner = sub
    if isinstance(inner.get("$ref"), str):
        target = _v1_ref(root, inner["$ref"])
        model = _pydantic_model(getattr(field, "type_", None))
        if target is not None and model is not None:
            _v1_nullable(model, target, root, seen)
    subs = getattr(field, "sub_fields", None) or ()
    if len(subs) == 1 and isinstance(inner.get("items"), dict):
        inner["items"] = _v1_field(subs[0], inner["items"], root, seen)
    elif len(subs) == 1 and isinstance(inner.get("additionalProperties"),
                                       dict):
        inner["additionalProperties"] = _v1_field(
            subs[0], inner["additionalProperties"], root, seen)
    if not getattr(field, "allow_none", False) or \
            inner.get("type") == "null":
        return sub
    keep = {k: inner.pop(k) for k in ("title", "description", "default")
            if k in inner}
    return dict(keep, anyOf=[inner, {"type": "null"}])


def _v1_ref(root: dict, ref: str) -> dict | None:
    """The definition a local "#/definitions/Name" names in root."""
    if not ref.startswith("#/definitions/"):
        return None
    found = (root.get("definitions") or {}).get(ref[len("#/definitions/"):])
    return found if isinstance(found, dict) else None


def _schema(value: Any, name: str, mode: str) -> tuple[dict | None, Any]:
    """The JSON Schema of a schema field, and its pydantic model or None.
    mode is pydantic's: "validation" for what the tool receives,
    "serialization" for what it produces."""
    if value is None:
        return None, None
    if isinstance(value, Mapping):
        return dict(value), None
    if isinstance(value, bool):
        return value, None  # type: ignore[return-value]
    model = _pydantic_model(value)
    if model is not None:
        if hasattr(model, "model_json_schema"):
            return model.model_json_schema(mode=mode), model
        schema = model.schema(by_alias=True)
        _v1_nullable(model, schema, schema, set())
        return schema, model
    raise TypeError("%s must be a JSON Schema (a dict) or a pydantic model "
                    "class, not %r" % (name, value))


def parse_model(model: Any, value: Any) -> Any:
    """parse_model makes a pydantic model instance of value."""
    if hasattr(model, "model_validate"):
        return model.model_validate(value)
    return model.parse_obj(value)


# ---- the tool -----------------------------------------------------------------

class Tool:
    """A tool a worker serves: its createTool() definition and functions.

    ``execute(input)`` or ``execute(input, ctx)``, plain or async, returns
    the output, raises ``Suspend`` (through ``ctx.suspend(payload)``) or
    raises an error (``ToolError`` for berth's error fields). The other
    function fields:

    - ``require_approval``: a bool, or ``fn(input[, info])`` returning one;
    - ``to_model_output``: ``fn(output)``, the job's ``modelOutput``;
    - ``transform``: a :class:`Transform` (or dict) of ``fn(t)`` per target
      and stage, ``t`` a :class:`~berth.TransformContext`;
    - ``on_input_available``: ``fn(input[, info])``, before the first run;
    - ``on_output``: ``fn(output[, info])``, after a run that produced an
      output. A hook that raises is logged on the job and changes nothing.

    ``info`` is a :class:`~berth.CallInfo`. A Tool can be called like its
    execute function, which makes it easy to test.
    """

    def __init__(self, id: str, execute: Callable[..., Any], *,
                 description: str | None = None,
                 title: str | None = None,
                 input_schema: Any = None,
                 output_schema: Any = None,
                 suspend_schema: Any = None,
                 resume_schema: Any = None,
                 request_context_schema: Any = None,
                 strict: bool | None = None,
                 input_examples: Iterable[Any] | None = None,
                 provider_options: Mapping[str, Any] | None = None,
                 require_approval: bool | Callable[..., Any] = False,
                 approval_policy: Mapping[str, Any] | None = None,
                 background: Background | Mapping[str, Any] | None = None,
                 mcp: Mapping[str, Any] | None = None,
                 to_model_output: Callable[..., Any] | None = None,
                 transform: Transform | Mapping[str, Any] | None = None,
                 on_input_available: Callable[..., Any] | None = None,
                 on_output: Callable[..., Any] | None = None):
        if not isinstance(id, str) or not id:
            raise ValueError("a tool's id must be a non-empty string, not %r"
                             % (id,))
        self.id = id
        where = "tool %s: " % id
        self.execute = _Fn.of(execute, where + "execute", 2)
        self._def: dict[str, Any] = {"id": id}
        for key, value in (("title", title), ("description", description)):
            if value is not None:
                if not isinstance(value, str):
                    raise TypeError(where + "%s must be a string" % key)
                self._def[key] = value
        self.models: dict[str, Any] = {}
        for key, value, mode in (
                ("inputSchema", input_schema, "validation"),
                ("outputSchema", output_schema, "serialization"),
                ("suspendSchema", suspend_schema, "serialization"),
                ("resumeSchema", resume_schema, "validation"),
                ("requestContextSchema", request_context_schema,
                 "validation")):
            schema, model = _schema(value, where + key, mode)
            if schema is not None:
                self._def[key] = schema
            if model is not None:
                self.models[key] = model
        if strict is not None:
            self._def["strict"] = _bool(strict, where + "strict")
        if input_examples is not None:
            examples = []
            for i, ex in enumerate(input_examples):
                if not isinstance(ex, Mapping) or "input" not in ex:
                    raise TypeError(where + "input_examples[%d] must be a "
                                    "dict {'input': ...}, as createTool's "
                                    "inputExamples" % i)
                examples.append(dict(ex))
            self._def["inputExamples"] = examples
        if provider_options is not None:
            if not isinstance(provider_options, Mapping):
                raise TypeError(where + "provider_options must be a dict")
            self._def["providerOptions"] = dict(provider_options)

        self.require_approval: _Fn | None = None
        if callable(require_approval):
            self.require_approval = _Fn.of(require_approval,
                                           where + "require_approval", 2)
            self._def["requireApproval"] = "function"
        elif require_approval is True:
            self._def["requireApproval"] = True
        elif require_approval is not False and require_approval is not None:
            raise TypeError(where + "require_approval must be a bool or a "
                            "function, not %r" % (require_approval,))
        if approval_policy is not None:
            if not isinstance(approval_policy, Mapping):
                raise TypeError(where + "approval_policy must be a dict")
            self._def["approvalPolicy"] = dict(approval_policy)
        if background is not None:
            if isinstance(background, Background):
                bg = background.to_wire()
            elif isinstance(background, Mapping):
                for key in background:
                    if key in _BERTH_NAMES:
                        raise ValueError(
                            where + "background has no field %r: berth's "
                            "is %s" % (key, _BERTH_NAMES[key]))
                    if key not in _BACKGROUND_KEYS:
                        raise ValueError(
                            where + "background has no field %r (berth's "
                            "are %s; or use berth.Background with "
                            "durations in seconds)"
                            % (key, ", ".join(_BACKGROUND_KEYS)))
                bg = dict(background)
                _check_background_wire(bg, where)
            else:
                raise TypeError(where + "background must be a "
                                "berth.Background or a dict")
            if bg:
                self._def["background"] = bg
        if mcp is not None:
            if not isinstance(mcp, Mapping):
                raise TypeError(where + "mcp must be a dict")
            for key in mcp:
                if key not in _MCP_KEYS:
                    raise ValueError(where + "mcp has no field %r (it has "
                                     "'annotations' and '_meta')" % (key,))
            self._def["mcp"] = dict(mcp)

        functions: dict[str, Any] = {}
        self.to_model_output = None
        if to_model_output is not None:
            self.to_model_output = _Fn.of(to_model_output,
                                          where + "to_model_output", 1)
            functions["toModelOutput"] = True
        self.transforms: dict[str, dict[str, _Fn]] = {}
        if transform is not None:
            if isinstance(transform, Transform):
                targets = {"display": transform.display,
                           "transcript": transform.transcript}
            elif isinstance(transform, Mapping):
                targets = dict(transform)
            else:
                raise TypeError(where + "transform must be a berth.Transform "
                                "or a dict of display and transcript")
            declared: dict[str, list[str]] = {}
            for target, stages in targets.items():
                if target not in _TARGETS:
                    raise ValueError(where + "transform has no target %r "
                                     "(it has display and transcript)"
                                     % (target,))
                if not stages:
                    continue
                if not isinstance(stages, Mapping):
                    raise TypeError(where + "transform.%s must be a dict of "
                                    "stage to function" % target)
                fns = {}
                for stage, fn in stages.items():
                    if stage not in STAGES:
                        raise ValueError(
                            where + "transform.%s has no stage %r (berth's "
                            "stages are %s; inputDelta has no source in a "
                            "daemon)" % (target, stage, ", ".join(STAGES)))
                    fns[stage] = _Fn.of(fn, where + "transform.%s.%s"
                                        % (target, stage), 1)
                self.transforms[target] = fns
                declared[target] = [s for s in STAGES if s in fns]
            if declared:
                functions["transform"] = declared
        self.on_input_available = None
        if on_input_available is not None:
            self.on_input_available = _Fn.of(on_input_available,
                                             where + "on_input_available", 2)
            functions["onInputAvailable"] = True
        self.on_output = None
        if on_output is not None:
            self.on_output = _Fn.of(on_output, where + "on_output", 2)
            functions["onOutput"] = True
        if functions:
            self._def["functions"] = functions

    def definition(self) -> dict[str, Any]:
        """The tool's Definition as ``worker/register`` sends it
        (docs/WORKERS.md): its createTool() fields as JSON, and which
        function fields it has."""
        return dict(self._def)

    def transformed_stages(self) -> set[str]:
        """The stages for which the tool has a transform of any target."""
        return {s for fns in self.transforms.values() for s in fns}

    def __call__(self, *args: Any, **kw: Any) -> Any:
        return self.execute.fn(*args, **kw)

    def __repr__(self) -> str:
        return "<berth.Tool %s>" % self.id


def tool(fn: Callable[..., Any] | None = None, /, *, id: str | None = None,
         **fields: Any) -> Any:
    """tool makes a Tool of the function it decorates: ``@tool`` alone
    takes the function's name as the id and its docstring as the
    description; ``@tool(id=..., description=..., input_schema=...)``
    takes Tool's fields."""
    def make(f: Callable[..., Any]) -> Tool:
        kw = dict(fields)
        if "description" not in kw:
            doc = inspect.getdoc(f)
            if doc:
                kw["description"] = doc
        return Tool(id if id is not None else f.__name__, f, **kw)
    if fn is not None:
        return make(fn)
    return make
