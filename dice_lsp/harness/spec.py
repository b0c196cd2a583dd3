"""The launch spec: how to run one kernel of a .cu file directly, written in the file as a TOML comment.

    /* dice:launch
    kernel = "saxpy"
    sizes = { n = 16777216 }
    grid = ["cdiv(n, 256)"]
    block = [256]
    args = [
      { name = "y", role = "inout", dtype = "float32", shape = ["n"] },
      { name = "x", role = "in", dtype = "float32", shape = ["n"] },
      { name = "a", role = "scalar", dtype = "float32", value = "2.5" },
      { name = "n", role = "scalar", dtype = "int32", value = "n" },
    ]
    */

Grid, block, shapes, scalar values and `shared_bytes` are expressions over the sizes (`+ - * / // %`,
`cdiv`, `min`, `max`). Besides the timed sizes, verification runs at `check_sizes` (by default each size
halved plus one, rounded up to `align`), so a kernel that hard-codes a size or skips its bounds check
fails there. `reference` names another kernel of the same file computing the same thing.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dice_lsp.errors import DiceError

Role = Literal["in", "out", "inout", "scalar"]
DTYPES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int32": 4,
          "uint32": 4, "int64": 8}
ROLES = ("in", "out", "inout", "scalar")
_BLOCK = re.compile(r"/\*\s*dice:launch\b(?P<body>.*?)\*/", re.DOTALL)
_FUNCTIONS: dict[str, Callable[..., Any]] = {"cdiv": lambda a, b: -(-a // b), "min": min, "max": max}
_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}


def evaluate(expression: str | int | float, sizes: Mapping[str, int]) -> int | float:
    """The value of a spec expression; only arithmetic over sizes, numbers and cdiv/min/max."""
    if isinstance(expression, int | float):
        return expression
    try:
        tree = ast.parse(str(expression), mode="eval").body
    except SyntaxError as exc:
        raise DiceError(f"launch spec: cannot parse {expression!r}") from exc
    return _value(tree, sizes, str(expression))


def _value(node: ast.expr, sizes: Mapping[str, int], text: str) -> int | float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in sizes:
        return sizes[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand, sizes, text)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        result: int | float = _OPERATORS[type(node.op)](_value(node.left, sizes, text), _value(node.right, sizes, text))
        return result
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        called: int | float = _FUNCTIONS[node.func.id](*(_value(a, sizes, text) for a in node.args))
        return called
    raise DiceError(f"launch spec: {text!r}: only sizes, numbers, + - * / // % and cdiv/min/max are allowed")


@dataclass(frozen=True)
class Arg:
    name: str
    role: Role
    dtype: str
    shape: tuple[str | int, ...] = ()  # tensors only
    value: str | int | float | None = None  # scalars only

    def numel(self, sizes: Mapping[str, int]) -> int:
        return math.prod(int(evaluate(s, sizes)) for s in self.shape)

    def nbytes(self, sizes: Mapping[str, int]) -> int:
        return self.numel(sizes) * DTYPES[self.dtype]


@dataclass(frozen=True)
class LaunchSpec:
    kernel: str
    sizes: dict[str, int]
    grid: tuple[str | int, ...]
    block: tuple[str | int, ...]
    args: tuple[Arg, ...]
    shared_bytes: str | int = 0
    check_sizes: tuple[dict[str, int], ...] = ()
    align: dict[str, int] = field(default_factory=dict)
    reference: str | None = None

    def launch(self, sizes: Mapping[str, int]) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        """(grid, block, dynamic shared bytes) at `sizes`."""
        def dims(values: tuple[str | int, ...]) -> tuple[int, int, int]:
            found = [int(evaluate(v, sizes)) for v in values] + [1, 1]
            return found[0], found[1], found[2]
        return dims(self.grid), dims(self.block), int(evaluate(self.shared_bytes, sizes))

    def verification_sizes(self) -> list[dict[str, int]]:
        """The timed sizes first, then the check sizes."""
        if self.check_sizes:
            return [self.sizes, *self.check_sizes]
        derived = {k: -(-(v // 2 + 1) // self.align.get(k, 1)) * self.align.get(k, 1) for k, v in self.sizes.items()}
        return [self.sizes] + ([derived] if derived != self.sizes else [])

    def bytes_moved(self, sizes: Mapping[str, int]) -> int:
        """The fewest bytes a kernel must move: each input read once, each output written once."""
        return sum(a.nbytes(sizes) * (2 if a.role == "inout" else 1) for a in self.args if a.role != "scalar")


def find_specs(source: str) -> list[tuple[LaunchSpec, str]]:
    """Every launch spec written in `source` (one per kernel to run), with its TOML text."""
    return [(parse_spec(m.group("body")), m.group("body")) for m in _BLOCK.finditer(source)]


def parse_spec(text: str) -> LaunchSpec:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DiceError(f"launch spec is not valid TOML: {exc}") from exc
    try:
        spec = LaunchSpec(
            kernel=str(raw["kernel"]), sizes={str(k): int(v) for k, v in raw.get("sizes", {}).items()},
            grid=_dims(raw["grid"]), block=_dims(raw["block"]),
            args=tuple(_arg(a) for a in raw["args"]), shared_bytes=raw.get("shared_bytes", 0),
            check_sizes=tuple({str(k): int(v) for k, v in s.items()} for s in raw.get("check_sizes", [])),
            align={str(k): int(v) for k, v in raw.get("align", {}).items()}, reference=raw.get("reference"))
    except KeyError as exc:
        raise DiceError(f"launch spec: missing {exc.args[0]!r}") from exc
    except (TypeError, ValueError, AttributeError) as exc:
        raise DiceError(f"launch spec: {exc}") from exc
    _validate(spec)
    return spec


def _dims(value: object) -> tuple[str | int, ...]:
    values = value if isinstance(value, list) else [value]
    if not 1 <= len(values) <= 3 or not all(isinstance(v, str | int) for v in values):
        raise DiceError("launch spec: grid and block take one to three sizes")
    return tuple(values)


def _arg(raw: dict[str, object]) -> Arg:
    role = raw.get("role")
    if role not in ROLES:
        raise DiceError(f"launch spec: argument {raw.get('name')!r}: role must be one of {', '.join(ROLES)}")
    dtype = str(raw.get("dtype"))
    if dtype not in DTYPES:
        raise DiceError(f"launch spec: argument {raw.get('name')!r}: dtype must be one of {', '.join(DTYPES)}")
    shape = raw.get("shape", [])
    value = raw.get("value")
    if role == "scalar" and value is None:
        raise DiceError(f"launch spec: scalar {raw.get('name')!r} needs a value")
    if role != "scalar" and not shape:
        raise DiceError(f"launch spec: tensor {raw.get('name')!r} needs a shape")
    return Arg(str(raw["name"]), role, dtype, tuple(shape) if isinstance(shape, list) else (shape,),  # type: ignore[arg-type]
               value if isinstance(value, str | int | float) else None)


def _validate(spec: LaunchSpec) -> None:
    """Evaluate everything once at every size, so a typo fails here, not in the child process."""
    for sizes in spec.verification_sizes():
        spec.launch(sizes)
        for arg in spec.args:
            if arg.role == "scalar":
                evaluate(arg.value if arg.value is not None else 0, sizes)
            elif arg.numel(sizes) <= 0:
                raise DiceError(f"launch spec: tensor {arg.name!r} is empty at sizes {sizes}")
