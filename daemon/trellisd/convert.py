"""The one converter between the wire's JSON and the daemon's typed values.

Fields are camelCase on the wire and snake_case in Python: every attrs class structures with
its fields renamed by ``camel``. Structuring is strict (a string is not a number, ``true`` is
not 1), a ``null`` optional field counts as left out, and every failure becomes one
``InvalidParams`` naming the field, dotted when nested (``provider.temperature``).

A class may word its own refusals: a field's ``must`` metadata is said of it when its value,
or an item of it that is not an object, is not of its type (``layers[0].denyWrite must be a
list of strings``); a validator raises ``Invalid`` with what is wrong of a value of the
right type; a class whose ``closed`` names its kind refuses keys it does not know
(``policy.aproval is not a policy field``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import (
    CattrsError,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from .errors import InvalidParams

T = TypeVar("T")


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class Invalid(ValueError):
    """What is wrong with a value of the right type, said of the field: ``problem`` follows
    its name (``must be a non-empty string``); ``field`` is its path under the class that
    raised it (an attrs validator names its attribute: ``Invalid.of(attribute, ...)``)."""

    def __init__(self, problem: str, field: str = "") -> None:
        super().__init__(problem)
        self.problem, self.field = problem, field

    @classmethod
    def of(cls, attribute: attrs.Attribute[Any], problem: str, at: str = "") -> Invalid:
        return cls(problem, camel(attribute.name) + at)


def nonempty(problem: str) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    """A validator refusing an empty value (``""``, ``()``) with ``problem``."""

    def check(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if not value:
            raise Invalid.of(attribute, problem)

    return check


class _Missing(Exception):
    pass


class _WrongType(Exception):
    def __init__(self, what: str, value: Any) -> None:
        super().__init__(what)
        self.what, self.value = what, value


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null"


def _strict(kind: type, what: str, accept: Callable[[Any], bool]) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if value is None:
            raise _Missing()
        if not accept(value):
            raise _WrongType(what, value)
        return kind(value)

    return structure


class _AtIndex(Exception):
    def __init__(self, index: int, error: Exception) -> None:
        super().__init__(str(error))
        self.index, self.error = index, error


def _object(value: Any, _: Any) -> dict[str, Any]:
    if value is None:
        raise _Missing()
    if not isinstance(value, dict):
        raise _WrongType("an object", value)
    return value


def _turn_or_null(value: Any, _: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _WrongType("a turn id or null", value)


def _is_list(kind: Any) -> bool:
    origin: Any = get_origin(kind)
    return origin is list or (origin is tuple and get_args(kind)[1:] == (...,))


def _make() -> cattrs.Converter:
    c = cattrs.Converter(detailed_validation=True)
    c.register_structure_hook(str, _strict(str, "a string", lambda v: isinstance(v, str)))
    c.register_structure_hook(bool, _strict(bool, "true or false", lambda v: isinstance(v, bool)))
    c.register_structure_hook(
        int,
        _strict(int, "a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    )
    c.register_structure_hook(bool, _strict(bool, "a boolean", lambda v: isinstance(v, bool)))
    c.register_structure_hook(
        float,
        _strict(
            float, "a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool)
        ),
    )
    c.register_structure_hook_func(lambda t: t == dict[str, Any], _object)

    def structure_list(value: Any, kind: Any) -> list[Any] | tuple[Any, ...]:
        if value is None:
            raise _Missing()
        if not isinstance(value, list):
            raise _WrongType("an array", value)
        item = get_args(kind)[0]
        out = []
        for index, element in enumerate(value):
            try:
                out.append(c.structure(element, item))
            except Exception as exc:
                raise _AtIndex(index, exc) from None
        return out if get_origin(kind) is list else tuple(out)

    c.register_structure_hook_func(_is_list, structure_list)

    def structure_factory(cls: type) -> Any:
        renames = {a.name: override(rename=camel(a.name)) for a in attrs.fields(cls)}
        closed = getattr(cls, "closed", None) is not None
        inner: Any = make_dict_structure_fn(
            cls,
            c,
            _cattrs_forbid_extra_keys=closed,
            **renames,  # type: ignore[arg-type]
        )

        def structure(value: Any, _: Any) -> Any:
            if value is None:
                raise _Missing()
            if not isinstance(value, dict):
                raise _WrongType("an object", value)
            return inner(value, cls)

        return structure

    def unstructure_factory(cls: type) -> Any:
        renames = {
            a.name: override(rename=camel(a.name), omit_if_default=True) for a in attrs.fields(cls)
        }
        return make_dict_unstructure_fn(cls, c, **renames)  # type: ignore[arg-type]

    c.register_structure_hook_factory(attrs.has, structure_factory)
    c.register_unstructure_hook_factory(attrs.has, unstructure_factory)
    return c


converter = _make()


def turn_or_null(kind: Any) -> None:
    """Structure fields of ``kind`` (a union of ``str``, ``None`` and a marker that is only
    ever a default) from a turn id or null, so that null differs from a field left out."""
    converter.register_structure_hook_func(lambda t: t == kind, _turn_or_null)


def structure(value: Any, cls: type[T], where: str = "") -> T:
    """``value`` as a ``cls``, or an ``InvalidParams`` naming the field (under ``where``)."""
    if value is None and not where:
        value = {}  # params left out or null: served as if empty
    try:
        return converter.structure(value, cls)
    except (
        ClassValidationError,
        IterableValidationError,
        _Missing,
        _WrongType,
        _AtIndex,
        Invalid,
    ) as exc:
        raise _invalid(exc, where) from None


def unstructure(value: Any) -> Any:
    """A typed value as JSON: camelCase keys, fields left at their default left out."""
    return converter.unstructure(value)


def _invalid(exc: BaseException, path: str) -> InvalidParams:
    if isinstance(exc, InvalidParams):
        return exc
    if isinstance(exc, ClassValidationError):
        sub = exc.exceptions[0]
        step = _note(sub)
        must = _must(exc.cl, sub)
        if must is not None:
            field = _join(path, step)
            return InvalidParams(f"{field} must {must}", field=field)
        return _invalid(sub, _join(path, step))
    if isinstance(exc, IterableValidationError):
        sub = exc.exceptions[0]
        return _invalid(sub, _join(path, _note(sub)))
    if isinstance(exc, _AtIndex):
        return _invalid(exc.error, f"{path}[{exc.index}]")
    if isinstance(exc, Invalid):
        field = _join(path, exc.field)
        return InvalidParams(f"{field} {exc.problem}", field=field)
    if isinstance(exc, ForbiddenExtraKeysError):
        known = sorted(camel(a.name) for a in attrs.fields(exc.cl))
        field = _join(path, sorted(exc.extra_fields)[0])
        kind: str = getattr(exc.cl, "closed", "known")
        return InvalidParams(
            f"{field} is not a {kind} field (expected {', '.join(known)})", field=field
        )
    field = path or "params"
    if isinstance(exc, KeyError | _Missing):
        return InvalidParams(f"{field} is required", field=field)
    if isinstance(exc, _WrongType):
        if not path:
            return InvalidParams(f"params must be {exc.what}", field=field)
        return InvalidParams(f"{field} must be {exc.what}, not {json_type(exc.value)}", field=field)
    if isinstance(exc, ValueError):  # a Literal's other values
        return InvalidParams(f"{field} is not one of the allowed values", field=field)
    return InvalidParams(f"{field} is not valid: {exc}", field=field)


def _must(cls: type, exc: BaseException) -> str | None:
    """The class's own wording for a field whose value is not of its type, if it has one:
    the value itself is wrong, or an item of it that is not an object."""
    name = next((getattr(n, "name", None) for n in getattr(exc, "__notes__", [])), None)
    if name is None:
        return None
    attribute = attrs.fields_dict(attrs.resolve_types(cls))[name]
    must: str | None = attribute.metadata.get("must")
    if isinstance(exc, _AtIndex):
        items = get_args(attribute.type)
        if items and attrs.has(items[0]):
            return None
        return must
    if isinstance(exc, KeyError | _Missing | _WrongType | Invalid) or type(exc) is CattrsError:
        return must  # CattrsError: a value a Literal does not list
    return None


def _note(exc: BaseException) -> str | int:
    for note in getattr(exc, "__notes__", []):
        name = getattr(note, "name", None)
        if name is not None:
            return camel(name)
        index = getattr(note, "index", None)
        if index is not None:
            return int(index)
    return ""


def _join(path: str, step: str | int) -> str:
    if isinstance(step, int):
        return f"{path}[{step}]"
    if not step:
        return path
    return f"{path}.{step}" if path else step
