"""Errors a user can act on: each carries a one-line message fit for a CLI or an editor."""


class DiceError(Exception):
    """Base class: the message is shown to the user as is."""


class ModelLoadError(DiceError):
    """A model folder is missing, malformed, or does not match its config."""


class InputError(DiceError):
    """A request names a missing file, a position outside it, or text that cannot be read."""


class Cancelled(DiceError):
    """A generation was cancelled between two denoising steps."""
