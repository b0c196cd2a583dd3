"""The team server's limits, in one place: what one connection may hold, and what one request may ask for.

A token holder is trusted to run code in the sandbox, not to size the server: without caps one request
asked for 2048 candidates (the server died), a 2^64-1 token canvas (115 s of model time) or a `nan`
timeout (the GPU held for good). So every parameter a request carries is checked here before any work
starts, against the operator's configuration (`dice-lsp serve --max-*`, the Ray app's args), and anything
out of range is a `bad_params` error whose one-line reason names the parameter and the limit.

Connection limits hold before authentication too: a few KiB for the first frame (the `auth` frame with the
token), a few seconds to send it, a cap per peer address, and caps on unauthenticated connections per address
and overall (where one is reached, a newcomer closes the oldest connection still waiting to authenticate, so
silent connections cannot keep out a client that authenticates at once), and a growing delay before a wrong
token is answered. After it, a frame may unpack into a bounded number of values (a 16 MiB frame of empty
arrays would otherwise cost the server a GiB). Their defaults live here as well, so the CLI, the Ray
configs and the docs read them from one place.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import asdict, dataclass, fields
from pathlib import PurePosixPath
from typing import Any, TypeVar

from dice_lsp.errors import DiceError
from dice_lsp.remote.protocol import MAX_FRAME, RemoteError
from dice_lsp.settings import Settings, editor_key, finite_number

MIB = 1024 * 1024
MIN_FRAME_OBJECTS = 1024  # values of a frame: a request with its files and settings holds a few hundred
MAX_PENDING = 64  # requests a team server has in flight at once; more are answered "busy"


@dataclass(frozen=True)
class ConnectionLimits:
    """What one connection may hold, and for how long (`dice-lsp serve` flags of the same names)."""

    preauth_frame: int = 4096  # bytes of a frame before the connection is admitted (the `auth` frame)
    handshake_timeout: float = 5.0  # seconds from connecting to a whole first frame
    idle_timeout: float = 300.0  # seconds an admitted connection with nothing in flight is kept
    frame_timeout: float = 60.0  # seconds a frame may take to arrive once its first byte has
    stall_timeout: float = 30.0  # seconds a client may leave its replies unread (over reply_buffer)
    reply_buffer: int = 4 * MIB  # unsent reply bytes above which the connection's frames are not read
    max_in_flight: int = 16  # requests of one connection running at once; more are answered `busy`
    max_connections_per_peer: int = 32  # open connections from one address (an IPv6 /64 counts as one)
    max_unauthenticated: int = 256  # connections not yet admitted, all peers together
    max_unauthenticated_per_peer: int = 8  # connections not yet admitted from one address
    max_frame_objects: int = 65536  # values one frame may unpack into (strings, numbers, arrays, maps, keys)
    backoff: float = 0.5  # seconds before the first wrong token of an address is answered; doubles
    backoff_max: float = 30.0  # the most a wrong token waits

    def __post_init__(self) -> None:
        if not 256 <= self.preauth_frame <= MAX_FRAME:
            raise DiceError(f"preauth_frame must be between 256 and {MAX_FRAME} bytes (an auth frame must fit)")
        if self.backoff_max < self.backoff:
            raise DiceError("backoff_max must not be below backoff")
        if self.max_frame_objects < MIN_FRAME_OBJECTS:
            raise DiceError(f"max_frame_objects must be at least {MIN_FRAME_OBJECTS} (a request and its files must "
                            "fit)")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RequestLimits:
    """The most one request may ask for (`dice-lsp serve --max-*`); surfaced in `status`."""

    max_candidates: int = 16  # candidates of a fill, optimize's rewrites, repair's tries per round
    max_tokens: int = 1024  # a region's canvas: fill's `max_tokens`, the `maxCanvas` setting
    max_steps: int = 64  # denoising steps per 32 canvas tokens (blockLength counted in)
    max_rounds: int = 10  # repair rounds
    max_request_bytes: int = 4 * MIB  # text, prefix, suffix and files of one request, UTF-8
    max_files: int = 256  # entries of `files`
    max_trials: int = 20  # bench's random-input trials
    max_timeout: float = 300.0  # seconds per kernel run (bench, optimize)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


HELP = {  # what each limit does, for `dice-lsp serve --help` (the flag is the name with dashes)
    "max_candidates": "most candidates a request may ask for (a fill's, optimize's rewrites, repair's tries)",
    "max_tokens": "largest region a request may fill, in tokens (fill's max_tokens, dice.maxCanvas)",
    "max_steps": "most denoising steps per 32 region tokens a request may ask for",
    "max_rounds": "most repair rounds a request may ask for",
    "max_request_bytes": "most bytes of text and files one request may carry",
    "max_files": "most files one request may carry",
    "max_trials": "most random-input trials a bench request may ask for",
    "max_timeout": "longest per-kernel timeout a bench or optimize request may ask for, in seconds",
    "preauth_frame": "largest frame before a connection is admitted, in bytes (the auth frame)",
    "handshake_timeout": "seconds a new connection has to send its auth frame",
    "idle_timeout": "seconds an admitted connection with nothing in flight is kept open",
    "frame_timeout": "seconds a frame may take to arrive once it has begun",
    "stall_timeout": "seconds a client may leave more than --reply-buffer of replies unread before it is cut off",
    "reply_buffer": "unsent reply bytes per connection above which its requests are not read",
    "max_in_flight": "requests of one connection running at once; more are answered busy",
    "max_connections_per_peer": "open connections per client address (an IPv6 /64 is one address)",
    "max_unauthenticated": "connections not yet authenticated, all addresses together; a new one closes the oldest",
    "max_unauthenticated_per_peer": "connections not yet authenticated from one address; a new one closes its oldest",
    "max_frame_objects": "most values (strings, numbers, arrays, maps, keys) one frame may hold",
    "backoff": "seconds before the first wrong token from an address is answered; doubles with each one",
    "backoff_max": "longest wait before a wrong token is answered, in seconds",
}
L = TypeVar("L", ConnectionLimits, RequestLimits)


def limits_from(kind: type[L], values: dict[str, Any]) -> L:
    """Limits from an operator's values (the serve flags, a Ray config's args): each a positive number, an
    integer where the field counts something; a DiceError names the first that is not."""
    known = {f.name: f.type for f in fields(kind)}
    checked: dict[str, Any] = {}
    for name, value in values.items():
        if name not in known:
            raise DiceError(f"unknown limit {name!r} (known: {', '.join(known)})")
        integral = known[name] == "int"
        if not finite_number(value) or (integral and not isinstance(value, int)) or value <= 0:
            raise DiceError(f"{name}: must be a positive {'integer' if integral else 'number'}, not {value!r}")
        if not integral and value > 1e9:
            raise DiceError(f"{name}: {value!r} is more than any real use")
        checked[name] = value if integral else float(value)
    return kind(**checked)


MAX_NAME_BYTES = 1024  # UTF-8 bytes of a file name in a request; the request's folder comes on top (4096 in all)
MAX_COMPONENT_BYTES = 255  # bytes of one component of it (NAME_MAX)
_FLAGS = {"max_candidates": "--max-candidates", "max_tokens": "--max-tokens", "max_steps": "--max-steps",
          "max_rounds": "--max-rounds", "max_request_bytes": "--max-request-bytes", "max_files": "--max-files",
          "max_trials": "--max-trials", "max_timeout": "--max-timeout"}


def bad(message: str) -> RemoteError:
    return RemoteError("bad_params", message)


def over(method: str, name: str, value: Any, limits: RequestLimits, field: str) -> RemoteError:
    def shown(number: Any) -> str:
        return f"{number:g}" if isinstance(number, float) else str(number)

    return bad(f"{method}: {name} {shown(value)} exceeds the server's limit of {shown(getattr(limits, field))} "
               f"({_FLAGS[field]})")


def text(method: str, params: dict[str, Any], name: str, required: bool = False) -> str | None:
    value = params.get(name)
    if value is None:
        if required:
            raise bad(f"{method}: missing parameter {name}")
        return None
    if not isinstance(value, str):
        raise bad(f"{method}: {name} must be a string")
    return value


def integer(method: str, params: dict[str, Any], name: str, minimum: int, required: bool = False) -> int | None:
    value = params.get(name)
    if value is None:
        if required:
            raise bad(f"{method}: missing parameter {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(f"{method}: {name} must be an integer")
    if value < minimum:
        raise bad(f"{method}: {name} must be at least {minimum}")
    return value


def seconds(method: str, params: dict[str, Any], name: str) -> float | int | None:
    """A positive, finite number of seconds (compared with limits as it is: a huge int is no float)."""
    value = params.get(name)
    if value is None:
        return None
    if not finite_number(value) or value <= 0:
        raise bad(f"{method}: {name} must be a positive number of seconds")
    return value  # type: ignore[no-any-return]


def shown_name(name: str) -> str:
    """A client's file name for a one-line message: quoted, control characters escaped, a long one cut."""
    return repr(name if len(name) <= 60 else name[:40] + "…" + name[-16:])


def file_name(method: str, name: Any, what: str) -> PurePosixPath:
    """`name` as the relative path of a file in the request's folder, or a `bad_params` naming what is wrong
    with it: not text, empty, a control character (NUL, newline, …), over MAX_NAME_BYTES in all or
    MAX_COMPONENT_BYTES in one component (where the file system would refuse it), absolute, `..`, or a name
    that ends in a folder (`.`, `a/`)."""
    if not isinstance(name, str) or not name:
        raise bad(f"{method}: {what} must be a non-empty relative path")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        raise bad(f"{method}: {what} {shown_name(name)} is not valid UTF-8") from None
    if any(unicodedata.category(char) == "Cc" for char in name):
        raise bad(f"{method}: {what} {shown_name(name)} holds a control character (NUL, newline, tab, ...); "
                  "a file name may not")
    if size > MAX_NAME_BYTES:
        raise bad(f"{method}: {what} {shown_name(name)} is {size} bytes, over the limit of {MAX_NAME_BYTES} "
                  "for a file name")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise bad(f"{method}: {what} {shown_name(name)} must be a relative path inside the request's folder "
                  "(not absolute, no '..')")
    if not path.parts or path.parts == (".",) or name.endswith(("/", "/.")):
        raise bad(f"{method}: {what} {shown_name(name)} names a folder, not a file")
    for part in path.parts:
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise bad(f"{method}: {what} {shown_name(name)} has a component of {len(part.encode('utf-8'))} bytes, "
                      f"over the limit of {MAX_COMPONENT_BYTES} (a file system's)")
    return path


def check_names(method: str, names: dict[PurePosixPath, str]) -> None:
    """The request's files (normalized path -> the name as sent) fit in one folder: no name is another's
    folder (`a` and `a/b.h`)."""
    for path, name in names.items():
        for folder in path.parents:
            if folder in names:
                raise bad(f"{method}: {shown_name(names[folder])} is a file, so {shown_name(name)} cannot lie "
                          "in it")


def check_size(method: str, params: dict[str, Any], limits: RequestLimits) -> None:
    """The text a request carries (text, prefix, suffix, files), in bytes and files, within the limits."""
    files = params.get("files")
    if files is None:
        files = {}
    if not isinstance(files, dict):
        raise bad(f"{method}: files must be a map of relative path to text")
    if len(files) > limits.max_files:
        raise over(method, "files", len(files), limits, "max_files")
    size = 0
    for name, content in files.items():
        file_name(method, name, "a name in files")
        if not isinstance(content, str):
            raise bad(f"{method}: files[{shown_name(name)}] must be text")
        size += len(content.encode("utf-8", "surrogatepass"))
    for name in ("text", "prefix", "suffix"):
        value = text(method, params, name)
        size += len(value.encode("utf-8", "surrogatepass")) if value is not None else 0
    if size > limits.max_request_bytes:
        raise bad(f"{method}: the request's text and files are {size} bytes, over the server's limit of "
                  f"{limits.max_request_bytes} (--max-request-bytes)")


def check_position(method: str, params: dict[str, Any]) -> None:
    integer(method, params, "line", 0, required=True)
    integer(method, params, "character", 0, required=True)
    selection = params.get("selection")
    if selection is None:
        return
    shaped = (isinstance(selection, list | tuple) and len(selection) == 2
              and all(isinstance(end, list | tuple) and len(end) == 2 for end in selection))
    if not shaped or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                             for end in selection for n in end):
        raise bad(f"{method}: selection must be [[line, character], [line, character]] of non-negative integers")


MAX_PROPOSALS = 6  # workspace candidates a completion request may carry (a client's index proposes 3)
MAX_PROPOSAL_CHARS = 400  # one proposed line, at most
MAX_PROPOSAL_COUNT = 1 << 20  # files/rivals of a proposal: a count, not a payload


def check_proposals(method: str, found: Any) -> None:
    """A completion request's `proposals`: at most `MAX_PROPOSALS` maps of one line of text (`text`), a score in
    [0, 1] and optional non-negative `files`/`rivals` counts; a `bad_params` error names what is wrong."""
    if not isinstance(found, list) or len(found) > MAX_PROPOSALS:
        raise bad(f"{method}: proposals must be a list of at most {MAX_PROPOSALS} candidates")
    for proposal in found:
        if not isinstance(proposal, dict) or set(proposal) - {"text", "score", "files", "rivals"}:
            raise bad(f"{method}: a proposal is a map of text, score, files and rivals")
        line = proposal.get("text")
        if not isinstance(line, str) or not line.strip() or "\n" in line or len(line) > MAX_PROPOSAL_CHARS:
            raise bad(f"{method}: a proposal's text must be one non-empty line of at most {MAX_PROPOSAL_CHARS} "
                      "characters")
        if not finite_number(proposal.get("score")) or not 0 <= proposal["score"] <= 1:
            raise bad(f"{method}: a proposal's score must be a number in [0, 1]")
        for name in ("files", "rivals"):
            count = proposal.get(name, 0)
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_PROPOSAL_COUNT:
                raise bad(f"{method}: a proposal's {name} must be an integer in [0, {MAX_PROPOSAL_COUNT}]")


def check_params(method: str, params: dict[str, Any], limits: RequestLimits) -> None:
    """Every parameter of one request, by type and against the limits; a `bad_params` RemoteError names the
    first one that is wrong. Settings are checked by `check_settings` once they are merged."""
    check_size(method, params, limits)
    if not isinstance(params.get("settings") or {}, dict):
        raise bad(f"{method}: settings must be a map of dice.* keys")
    if method == "complete":
        text(method, params, "text", required=True)
        check_position(method, params)
        if params.get("proposals") is not None:
            check_proposals(method, params["proposals"])
    elif method == "fill":
        text(method, params, "prefix", required=True)
        max_tokens = integer(method, params, "max_tokens", 1)
        if max_tokens is not None and max_tokens > limits.max_tokens:
            raise over(method, "max_tokens", max_tokens, limits, "max_tokens")
    elif method in ("check", "bench", "optimize", "repair"):
        text(method, params, "text", required=True)
        names = {file_name(method, name, "a name in files"): name for name in params.get("files") or {}}
        for name in ("path", "ref"):
            if params.get(name) is not None:
                path = file_name(method, params[name], name)
                if name == "path":
                    names.setdefault(path, params[name])
        check_names(method, names)
    if method == "optimize":
        text(method, params, "kernel", required=True)
    if method in ("bench", "optimize"):
        timeout = seconds(method, params, "timeout")
        if timeout is not None and timeout > limits.max_timeout:
            raise over(method, "timeout", timeout, limits, "max_timeout")
    if method == "bench":
        trials = integer(method, params, "trials", 1)
        if trials is not None and trials > limits.max_trials:
            raise over(method, "trials", trials, limits, "max_trials")
    if method == "repair":
        candidates = integer(method, params, "candidates", 1)
        if candidates is not None and candidates > limits.max_candidates:
            raise over(method, "candidates", candidates, limits, "max_candidates")


def steps_per_32(settings: Settings) -> int:
    """Model calls per 32 canvas tokens these settings ask for: `steps` per block when decoding in blocks."""
    if settings.block_length is None:
        return settings.steps
    return settings.steps * math.ceil(32 / settings.block_length)


def check_settings(method: str, settings: Settings, limits: RequestLimits) -> None:
    """The request's merged settings within the limits (each named as editors spell it)."""
    for name, field in (("candidates", "max_candidates"), ("optimize_candidates", "max_candidates"),
                        ("max_canvas", "max_tokens"), ("repair_rounds", "max_rounds")):
        value = getattr(settings, name)
        if value > getattr(limits, field):
            raise over(method, f"dice.{editor_key(name)}", value, limits, field)
    if steps_per_32(settings) > limits.max_steps:
        blocks = f" with dice.blockLength {settings.block_length}" if settings.block_length is not None else ""
        raise bad(f"{method}: dice.steps {settings.steps}{blocks} is {steps_per_32(settings)} model calls per 32 "
                  f"tokens, over the server's limit of {limits.max_steps} (--max-steps)")
