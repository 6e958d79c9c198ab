"""How every Hydra recipe ends: a user error is ONE `error: ...` line on stderr and exit 2, as the synthesis
CLI does (tts/synthesize.py); a bug keeps its full traceback (exit 1).

    @hydra.main(...)
    @user_errors
    def main(cfg): ...

    if __name__ == "__main__":
        recipe_entry(main)

`user_errors` catches the errors a user causes inside the task (a missing file, a corpus without features, a
checkpoint of another mel definition, a refused run directory); `recipe_entry` catches the ones Hydra finds
while composing the config, before the task runs (an unknown override key, a missing config group option).
"""

from __future__ import annotations

import functools
import os
import re
import sys
from typing import Any, Callable, NoReturn

from tts.errors import CheckpointError, MelConfigMismatchError

EXIT_USAGE = 2

OMEGACONF_CONTEXT = ("full_key:", "object_type=", "reference_type=")
INTERPOLATION_PREFIX = re.compile(r"^\w+ raised while resolving interpolation: ")

# set once a task decorated with `user_errors` starts: a Hydra error before it is one of composing the config
_task_started = False


class UsageError(RuntimeError):
    """Something the user asked for that cannot work: named in one line, exit 2."""


def _user_error_types() -> tuple[type[BaseException], ...]:
    """Imported lazily: each module is cheap, but the list spans the product and the recipes."""
    from omegaconf.errors import InterpolationResolutionError, MissingMandatoryValue

    from tts.data.corpus import CorpusError
    from tts.text.errors import TextError
    from tts.vocoder.data import VocoderDataError

    return (UsageError, CheckpointError, MelConfigMismatchError, CorpusError, VocoderDataError, TextError,
            FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError,
            MissingMandatoryValue, InterpolationResolutionError)


def one_line(error: BaseException) -> str:
    """The message of `error` on one line.  A DataLoader worker's error arrives as "Caught X in DataLoader worker
    process 0. Original Traceback ...": its last line is the worker's own message."""
    text = str(error).strip() or type(error).__name__
    # a config value checked by a resolver (e.g. recipes.extract_durations' data_root): its message, not OmegaConf's
    text = INTERPOLATION_PREFIX.sub("", text) or text
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # OmegaConf's context lines (full_key: ..., object_type=...) say where in the config, not what went wrong
    lines = [line for line in lines if not line.startswith(OMEGACONF_CONTEXT)] or lines
    if lines[0].startswith("Caught ") and "DataLoader worker" in lines[0]:
        return lines[-1]
    return " ".join(lines)


def user_error_cause(error: BaseException, extra: tuple[type[BaseException], ...] = ()) -> BaseException | None:
    """`error` or the exception it wraps (hydra.utils.instantiate wraps what a constructor raised) when it is a
    user error; None for a bug."""
    types = _user_error_types() + extra
    seen = error
    for _ in range(4):
        if isinstance(seen, types):
            return seen
        if seen.__cause__ is None:
            return None
        seen = seen.__cause__
    return None


def fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_USAGE)


def user_errors(task: Callable[..., Any] | None = None, *, extra: tuple[type[BaseException], ...] = ()):
    """Decorate a Hydra task: its user errors (plus `extra`, the recipe's own) end the process with one line
    and exit 2.  SystemExit is a BaseException, so Hydra lets it through untouched."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            global _task_started
            _task_started = True
            try:
                return fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 -- re-raised unless it is a user error
                cause = user_error_cause(e, extra)
                if cause is None or os.environ.get("TTS_DEBUG"):
                    raise
                fail(one_line(cause))

        return wrapped

    return wrap(task) if task is not None else wrap


def _config_error_line(error: BaseException) -> str:
    """Hydra's composition errors, which it prints over several lines, on one."""
    from hydra.errors import MissingConfigException

    text = one_line(error)
    if isinstance(error, MissingConfigException) and error.options:
        head = str(error).split("\n", 1)[0].strip()
        text = f"{head} (available: {', '.join(error.options)})"
    cause = error.__cause__
    if cause is not None and str(cause).strip():
        text += f" ({str(cause).strip().splitlines()[0]})"
    return text


def recipe_entry(hydra_main: Callable[[], Any]) -> NoReturn:
    """Run a `@hydra.main` function as `__main__`.  Hydra prints a config error over several lines with a hint
    about HYDRA_FULL_ERROR and exits 1; here it is one line and exit 2.  Any other exception that escapes the
    task is a bug and keeps its whole traceback."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    # Hydra re-raises instead of printing when this is set: the exception reaches us whole
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")
    try:
        hydra_main()
    except (HydraException, OmegaConfBaseException) as e:
        # inside the task, only a constructor refusing an override's keyword is the user's (the rest are bugs)
        bad_keyword = isinstance(e.__cause__, TypeError) and "argument" in str(e.__cause__)
        if os.environ.get("TTS_DEBUG") or (_task_started and not bad_keyword):
            raise
        fail(_config_error_line(e))
    raise SystemExit(0)
