"""How the completion's sources read one line of CUDA: its tokens (comments dropped), which words are the
language's vocabulary (keywords, types, builtins, `__`-names, CUDA API and intrinsic families) rather than names
of the user's code, and which variable a one-line declaration declares. The idiom bank keys lines with it, the
scope of a hole finds its locals with it, and the show filter asks whether a candidate declares a name."""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"""
    (?P<comment>//.*|/\*.*?(?:\*/|$))
  | (?P<string>"(?:\\.|[^"\\])*"?|'(?:\\.|[^'\\])*'?)
  | (?P<number>0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[uUlLfF]*)
  | (?P<word>[A-Za-z_]\w*)
  | (?P<op>::|->|\+\+|--|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|\S)
""", re.VERBOSE)

def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


KEYWORDS = _words("""
    alignas alignof and asm auto bool break case catch char char16_t char32_t class const const_cast constexpr
    continue decltype default delete do double dynamic_cast else enum explicit extern false float for friend
    goto if inline int long mutable namespace new noexcept not nullptr operator or private protected public
    register reinterpret_cast return short signed sizeof static static_assert static_cast struct switch
    template this throw true try typedef typeid typename union unsigned using virtual void volatile while
    NULL
""")
TYPES = _words("""
    size_t ptrdiff_t ssize_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t uint intptr_t
    uintptr_t half half2 bfloat16 nv_bfloat16 nv_bfloat162 dim3 cudaStream_t cudaError_t cudaEvent_t
    char1 char2 char3 char4 uchar1 uchar2 uchar3 uchar4 short1 short2 short3 short4 ushort1 ushort2 ushort3
    ushort4 int1 int2 int3 int4 uint1 uint2 uint3 uint4 long1 long2 long3 long4 ulong1 ulong2 ulong3 ulong4
    longlong1 longlong2 longlong3 longlong4 ulonglong1 ulonglong2 ulonglong3 ulonglong4 float1 float2 float3
    float4 double1 double2 double3 double4 std cub thrust cooperative_groups
""")
BUILTINS = _words("""
    threadIdx blockIdx blockDim gridDim warpSize printf assert min max abs
    sqrt sqrtf rsqrt rsqrtf cbrt cbrtf exp expf exp2 exp2f exp10 exp10f expm1 expm1f log logf log2 log2f
    log10 log10f log1p log1pf pow powf sin sinf cos cosf tan tanf sinh sinhf cosh coshf tanh tanhf asin asinf
    acos acosf atan atanf atan2 atan2f erf erff erfc erfcf fabs fabsf fmax fmaxf fmin fminf fma fmaf floor
    floorf ceil ceilf round roundf rint rintf trunc truncf fmod fmodf hypot hypotf isnan isinf isfinite
    signbit copysign copysignf ldexp ldexpf frexp frexpf sincos sincosf rcbrt rcbrtf normcdf normcdff
""")
_KEPT_PREFIXES = ("__", "atomic", "cuda", "cublas", "curand", "cufft", "cusparse", "cusolver", "make_")
_MEMBERS = frozenset({"x", "y", "z", "w"})  # .x .y .z .w: vector and builtin components


@dataclass(frozen=True)
class Token:
    text: str
    kind: str  # "string" | "number" | "word" | "op"
    spaced: bool  # whitespace stood before it in the line


def tokens(line: str) -> list[Token]:
    """The line's code tokens, comments dropped (an unterminated `/*` drops the rest of the line)."""
    out: list[Token] = []
    end = 0
    for match in _TOKEN.finditer(line):
        kind = match.lastgroup or "op"
        if kind != "comment":
            out.append(Token(match.group(), kind, match.start() > end))
        end = match.end()
    return out


def is_vocabulary(word: str) -> bool:
    """C/C++/CUDA vocabulary: keywords, types, builtins, `__`-names, CUDA API and intrinsic families."""
    return word in KEYWORDS or word in TYPES or word in BUILTINS or word.startswith(_KEPT_PREFIXES)


def is_kept(toks: list[Token], index: int) -> bool:
    """Whether the identifier at `index` stays concrete: vocabulary of C/C++/CUDA, not a name of the code."""
    word = toks[index].text
    if is_vocabulary(word):
        return True
    before = toks[index - 1].text if index else ""
    if before in (".", "->") and word in _MEMBERS:
        return True
    return before == "::" and index >= 2 and toks[index - 2].text in ("std", "cub", "thrust")


_QUALIFIERS = _words("""
    const volatile static extern register inline constexpr unsigned signed long short __shared__ __constant__
    __device__ __restrict__ __managed__ auto struct
""")
_NOT_TYPES = _words("""
    return if else for while do switch case goto delete new throw using typedef namespace template break continue
    default public private protected operator sizeof this true false nullptr NULL
""")


def declared_name(line: str) -> str | None:
    """The variable a one-line declaration declares (`int i = ...;`, `extern __shared__ float s[];`,
    `float4 v = ...`, `const T* __restrict__ p = ...`, the first of `float *a, *b;`), or None for any other line.
    Read by tokens: qualifiers, one type word (possibly `a::b`, with `<...>` arguments), `*`/`&`, the name, then
    `=`, `;`, `[`, `{` or `,`."""
    toks = tokens(line)
    i = 0
    while i < len(toks) and toks[i].text in _QUALIFIERS:
        i += 1
    if i >= len(toks) or toks[i].kind != "word" or toks[i].text in _NOT_TYPES:
        return None
    i += 1
    while i + 1 < len(toks) and toks[i].text == "::" and toks[i + 1].kind == "word":
        i += 2
    if i < len(toks) and toks[i].text == "<":  # template arguments: up to the matching `>`
        depth = 0
        while i < len(toks):
            depth += {"<": 1, ">": -1, ">>": -2}.get(toks[i].text, 0)
            i += 1
            if depth <= 0:
                break
    while i < len(toks) and (toks[i].text in ("*", "&", "&&") or toks[i].text in _QUALIFIERS):
        i += 1
    if i + 1 >= len(toks) or toks[i].kind != "word" or toks[i].text in _NOT_TYPES or is_vocabulary(toks[i].text):
        return None
    return toks[i].text if toks[i + 1].text in ("=", ";", "[", "{", ",") else None
