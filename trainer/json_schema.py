"""A validator for the JSON Schema subset that trainer/config.schema.json uses.

The trainer must run where only torch, transformers, peft and accelerate are
installed (the bare GPU image of bench/gpu-train.sh --device-image, see
trainer/README.md "Install"), so the config is checked against the shared
contract without the jsonschema package. The schema is generated from zod
(schemas/training/trainer-config.ts), which emits a small, fixed set of
keywords; this file implements exactly those, with draft 2020-12 semantics,
and refuses a schema that uses any other keyword, so a change on the
TypeScript side that needs more can never be silently ignored here.
trainer/tests/test_config_schema.py checks it against jsonschema itself where
that package is installed.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

# Keywords that only annotate; they never make a value invalid.
ANNOTATIONS = frozenset({"$schema", "title", "description", "$comment", "default"})
# Keywords this validator enforces.
ASSERTIONS = frozenset({"type", "enum", "anyOf", "properties", "required", "additionalProperties",
                        "propertyNames", "items", "minItems", "minLength", "minimum", "maximum",
                        "exclusiveMinimum", "exclusiveMaximum"})


class SchemaError(ValueError):
    """The schema itself uses a keyword this validator does not implement."""


class Violation:
    """One way a value fails the schema: where (a path of keys and indices) and why."""

    def __init__(self, path: tuple, message: str, depth: int):
        self.path = path
        self.message = message
        self.depth = depth  # schema nesting, for picking the most specific of several

    def __repr__(self) -> str:
        return f"Violation({'.'.join(map(str, self.path)) or '<root>'}: {self.message})"


def check_schema_keywords(schema: Any, where: str = "#") -> None:
    """Raise SchemaError when `schema` (recursively) uses a keyword outside the subset."""
    if schema is True or schema is False:
        return
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}: a schema must be an object or a boolean, got {type(schema).__name__}")
    for key, value in schema.items():
        if key in ANNOTATIONS:
            continue
        if key not in ASSERTIONS:
            raise SchemaError(f"{where}: keyword {key!r} is not implemented by trainer/json_schema.py "
                              f"(implemented: {', '.join(sorted(ASSERTIONS))})")
        if key == "properties":
            for name, sub in value.items():
                check_schema_keywords(sub, f"{where}/properties/{name}")
        elif key == "anyOf":
            for i, sub in enumerate(value):
                check_schema_keywords(sub, f"{where}/anyOf/{i}")
        elif key in ("additionalProperties", "propertyNames", "items"):
            check_schema_keywords(value, f"{where}/{key}")


def _is_type(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "integer":
        # JSON Schema: any number with a zero fractional part is an integer (1.0 is one).
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return isinstance(value, int) or (math.isfinite(value) and float(value).is_integer())
    raise SchemaError(f"unknown JSON type {name!r}")


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality for `enum`: true and 1 differ, 1 and 1.0 do not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def iter_violations(value: Any, schema: Any, path: tuple = (), depth: int = 0) -> Iterator[Violation]:
    """Every violation of `schema` by `value` (none: the value is valid)."""
    if schema is True:
        return
    if schema is False:
        yield Violation(path, "no value is allowed here", depth)
        return
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(_is_type(value, n) for n in names):
            yield Violation(path, f"{value!r} is not of type {' or '.join(repr(n) for n in names)}", depth)
            return  # the other keywords would only repeat it
    if "enum" in schema and not any(_json_equal(value, option) for option in schema["enum"]):
        yield Violation(path, f"{value!r} is not one of {schema['enum']!r}", depth)
    if "anyOf" in schema:
        branches = [list(iter_violations(value, sub, path, depth + 1)) for sub in schema["anyOf"]]
        if all(branches):
            # Report the branch that got furthest (the value's own type matched it), as jsonschema does.
            deepest = max(branches, key=lambda vs: max(v.depth for v in vs))
            if all(len(b) == 1 and b[0].path == path and "is not of type" in b[0].message for b in branches):
                yield Violation(path, f"{value!r} is not valid under any of the given schemas", depth)
            else:
                yield from deepest
    number = _is_type(value, "number")
    if number:
        if "minimum" in schema and value < schema["minimum"]:
            yield Violation(path, f"{value!r} is less than the minimum of {schema['minimum']!r}", depth)
        if "maximum" in schema and value > schema["maximum"]:
            yield Violation(path, f"{value!r} is greater than the maximum of {schema['maximum']!r}", depth)
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            yield Violation(path, f"{value!r} is less than or equal to the minimum of "
                                  f"{schema['exclusiveMinimum']!r}", depth)
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            yield Violation(path, f"{value!r} is greater than or equal to the maximum of "
                                  f"{schema['exclusiveMaximum']!r}", depth)
    if isinstance(value, str) and "minLength" in schema and len(value) < schema["minLength"]:
        yield Violation(path, f"{value!r} should be non-empty" if schema["minLength"] == 1
                        else f"{value!r} is shorter than {schema['minLength']} characters", depth)
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            yield Violation(path, f"{value!r} should have at least {schema['minItems']} item(s)", depth)
        if "items" in schema:
            for i, item in enumerate(value):
                yield from iter_violations(item, schema["items"], path + (i,), depth + 1)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                yield Violation(path, f"{name!r} is a required property", depth)
        extra = [k for k in value if k not in properties]
        additional = schema.get("additionalProperties", True)
        if additional is False and extra:
            listed = ", ".join(repr(k) for k in sorted(extra))
            yield Violation(path, f"Additional properties are not allowed ({listed} unexpected)", depth)
        elif additional is not True:
            for k in extra:
                yield from iter_violations(value[k], additional, path + (k,), depth + 1)
        if "propertyNames" in schema:
            for k in value:
                yield from iter_violations(k, schema["propertyNames"], path, depth + 1)
        for name, sub in properties.items():
            if name in value:
                yield from iter_violations(value[name], sub, path + (name,), depth + 1)


def first_violation(value: Any, schema: Any):
    """The most specific violation (deepest in the value), or None when `value` is valid."""
    best = None
    for v in iter_violations(value, schema):
        if best is None or len(v.path) > len(best.path):
            best = v
    return best
