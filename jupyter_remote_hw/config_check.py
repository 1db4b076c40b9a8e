"""The configuration checked before it is used: a file that does not load, or a setting
of the wrong type or out of range, is refused in one line naming the file, the setting
and what it may be, never a traceback and never silently ignored.

The command line loads the configuration with :func:`load_config_files` and checks it
with :func:`check_config`; the server extension checks the server's configuration with
:func:`check_config` before it builds anything, and refuses to start on a bad value or
on a file the server could not load (:func:`unloaded_config_file`): its settings,
budgets among them, would be silently missing.

Every number setting of jupyter-remote-hw is a finite number, 0 or more: NaN,
infinity or a negative budget or timeout never mean "no limit" (0 does, where a
setting's help says so).
"""

from __future__ import annotations

import copy
import difflib
import importlib
import json
import math
import os
import traceback
from collections.abc import Iterable, Sequence
from typing import Any

from traitlets import Bunch, Float, HasTraits, Int, TraitError, TraitType
from traitlets.config import Config, Configurable
from traitlets.config.loader import (
    ConfigFileNotFound,
    DeferredConfig,
    JSONFileConfigLoader,
    LazyConfigValue,
    PyFileConfigLoader,
)
from traitlets.traitlets import ValidateHandler

from .providers.registry import BUILTIN_PROVIDERS, provider_entry_points
from .validation import quote

#: The modules whose configurable classes are checked.
MODULES = (
    "jupyter_remote_hw.machines.manager",
    "jupyter_remote_hw.ledger.budget",
    "jupyter_remote_hw.providers",
    "jupyter_remote_hw.providers.aws.provider",
    "jupyter_remote_hw.transport",
    "jupyter_remote_hw.provisioner",
    "jupyter_remote_hw.provisioner.kernelspecs",
    "jupyter_remote_hw.server.extension",
    "jupyter_remote_hw.transfer.kernel_side.restricted",
    "jupyter_remote_hw.hibernation.store",
)


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file, the setting and
    what it may be.

    Attributes:
        path: The file at fault, or None when it is not known.
        setting: ``Class.trait``, or None for a file that does not load.
    """

    def __init__(self, message: str, path: str | None = None, setting: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.setting = setting


def load_config_files(
    names: Sequence[str], paths: Sequence[str], config_file: str | None = None
) -> tuple[Config, list[str]]:
    """Load configuration files as Jupyter applications do, refusing a broken one.

    Args:
        names: Base names searched in ``paths`` (``jupyter_config``,
            ``jupyter_server_config``), lowest priority first.
        paths: Directories, highest priority first (``JupyterApp.config_file_paths``).
        config_file: One file given by the user; it replaces the search for the
            last of ``names``.

    Returns:
        The merged configuration and the files it came from, in load order.

    Raises:
        ConfigError: A file does not run or parse: its path and line, and the error.
    """
    config = Config()
    loaded: list[str] = []
    searches: list[tuple[str, list[str]]] = [(n, list(reversed(paths))) for n in names]
    if config_file:
        directory, filename = os.path.split(os.path.abspath(config_file))
        searches[-1] = (os.path.splitext(filename)[0], [directory])
    for name, directories in searches:
        for directory in directories:
            for loader in (
                PyFileConfigLoader(name + ".py", path=directory),
                JSONFileConfigLoader(name + ".json", path=directory),
            ):
                try:
                    config.merge(loader.load_config())
                except ConfigFileNotFound:
                    continue
                except Exception as exc:  # noqa: BLE001 (the user's file: any error is theirs)
                    raise _load_error(loader.full_filename or name, exc) from None
                if loader.full_filename not in loaded:
                    loaded.append(loader.full_filename)
    return config, loaded


def config_file_candidates(
    names: Sequence[str], paths: Sequence[str], config_file: str | None = None
) -> list[str]:
    """The files a Jupyter application loads when they exist, as it searches for them.

    Args:
        names: Base names searched in ``paths`` (``jupyter_config``,
            ``jupyter_server_config``), lowest priority first.
        paths: Its configuration directories (``config_file_paths``).
        config_file: One file given by the user; it replaces the search for the
            last of ``names``.
    """
    found = [
        os.path.join(directory, name + suffix)
        for name in names[:-1]
        for directory in paths
        for suffix in (".py", ".json")
    ]
    if config_file:
        found.append(config_file)
    else:
        found += [
            os.path.join(directory, names[-1] + suffix)
            for directory in paths
            for suffix in (".py", ".json")
        ]
    return found


def unloaded_config_file(candidates: Iterable[str], loaded: Iterable[str]) -> ConfigError | None:
    """The first configuration file an application found but could not load, if any.

    For a server, which loads its files itself and goes on without one that fails
    (logging the error): a file that exists where it looks but is not among the
    ones it loaded did not load. Its error is found again by parsing it, never by
    running it a second time.

    Args:
        candidates: The files it loads when they exist (:func:`config_file_candidates`).
        loaded: The files it loaded (``loaded_config_files``).
    """
    done = {os.path.abspath(path) for path in loaded}
    for candidate in candidates:
        path = os.path.abspath(candidate)
        if path in done or not os.path.isfile(path):
            continue
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
            if path.endswith(".json"):
                json.loads(text)
            else:
                compile(text, path, "exec")
        except (OSError, SyntaxError, ValueError) as exc:
            return _load_error(path, exc)
        return ConfigError(
            f"configuration file {path} did not load (the error is logged above); fix or remove it",
            path,
        )
    return None


def _load_error(path: str, exc: BaseException) -> ConfigError:
    """A one-line error for a file that did not load, with the line at fault."""
    line: int | None = None
    if isinstance(exc, SyntaxError) and exc.filename == path:
        line = exc.lineno
        what = f"syntax error ({exc.msg})"
    else:
        line = getattr(exc, "lineno", None)  # json.JSONDecodeError has it
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            if frame.filename == path:
                line = frame.lineno
                break
        what = f"{type(exc).__name__}: {quote(str(exc), 200)[1:-1]}"
    at = f"{path}, line {line}" if line else path
    return ConfigError(f"configuration file {at}: {what}; fix or remove it", path)


def configurable_classes() -> list[type[Configurable]]:
    """Every configurable class of jupyter-remote-hw, its subclasses included."""
    for name in MODULES:
        importlib.import_module(name)
    for point in provider_entry_points():
        try:
            importlib.import_module(point.module)
        except Exception:
            if point.name in BUILTIN_PROVIDERS:
                raise
    found: list[type[Configurable]] = []
    pending: list[type[Any]] = [Configurable]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            pending.append(sub)
            if sub.__module__.startswith("jupyter_remote_hw.") and sub not in found:
                found.append(sub)
    return found


def check_config(
    config: Config, files: Iterable[str] = (), classes: Iterable[type[Configurable]] | None = None
) -> None:
    """Check every setting of ours in ``config`` (see the module's docstring).

    Args:
        config: The loaded configuration.
        files: The files it came from (to name the one setting a bad value).
        classes: The classes to check (default: :func:`configurable_classes`).

    Raises:
        ConfigError: The first bad setting: its file, ``Class.trait``, the value
            (shortened) and what it may be.
    """
    for cls in classes if classes is not None else configurable_classes():
        traits = cls.class_traits(config=True)
        for section in [c.__name__ for c in cls.mro() if issubclass(c, Configurable)]:
            if section not in config or not isinstance(config[section], Config):
                continue
            for name, value in config[section].items():
                trait = traits.get(name)
                if trait is None:
                    if section == cls.__name__:
                        raise _unknown_setting(files, section, name, traits)
                    continue
                if isinstance(value, LazyConfigValue):
                    # ``c.X.y.append(...)``: check what it makes of the default.
                    try:
                        value = value.get_value(trait.default())
                    except Exception:  # noqa: BLE001, S112 (traitlets will say it)
                        continue
                value = _from_command_line(trait, value)
                problem = _problem(trait, value) or _handler_problem(cls, name, trait, value)
                if problem is not None:
                    setting = f"{section}.{name}"
                    where = _file_setting(files, section, name) or "the configuration"
                    raise ConfigError(
                        f"{where}: c.{setting} = {quote(value)} is refused: "
                        f"{problem}{_purpose(trait)}",
                        where if where in files else None,
                        setting,
                    )


def _unknown_setting(
    files: Iterable[str], section: str, name: str, traits: dict[str, TraitType[Any, Any]]
) -> ConfigError:
    """A setting our class does not have: most often a misspelt one, which would
    otherwise be ignored with a warning (a budget that silently does not apply)."""
    where = _file_setting(files, section, name) or "the configuration"
    close = difflib.get_close_matches(name, list(traits), n=1)
    hint = (
        f": did you mean c.{section}.{close[0]}?"
        if close
        else (f"; its settings are listed by `jupyter server --help-all` under {section}")
    )
    return ConfigError(
        f"{where}: c.{section}.{quote(name)[1:-1]} is not a setting of {section}{hint}",
        where if where in files else None,
        f"{section}.{name}",
    )


def _from_command_line(trait: TraitType[Any, Any], value: Any) -> Any:
    """What a setting given on the command line (``--Class.name=value``) means to
    ``trait``.

    Before the configurable classes are known, traitlets keeps such a value as the
    string it came as (a ``DeferredConfigString``, or a list of them for a repeated
    option) and converts it only when the class loads it; this does the same
    conversion, so that ``--RemoteHWExtension.orphan_reap_interval=0`` is the number 0.
    A string that does not convert stays a plain string, and is refused as one.
    """
    if not isinstance(value, DeferredConfig):
        return value
    try:
        converted = value.get_value(trait)
    except (TraitError, ValueError):
        converted = value
    if isinstance(converted, DeferredConfig):
        return list(converted) if isinstance(converted, list) else str(converted)
    return converted


def _problem(trait: TraitType[Any, Any], value: Any) -> str | None:
    """``it must be ...`` (what ``trait`` allows) when ``value`` is not allowed; None
    when it is."""
    probe_class = type("ConfigProbe", (HasTraits,), {"value": copy.copy(trait)})
    try:
        probe_class().value = value
    except TraitError:
        return f"it must be {_allowed(trait)}"
    if isinstance(trait, Float | Int) and not isinstance(value, bool):
        number = float(value)
        if not math.isfinite(number) or number < _bounds(trait)[0]:
            return f"it must be {_allowed(trait)}"
    return None


def _handler_problem(
    cls: type[Configurable], name: str, trait: TraitType[Any, Any], value: Any
) -> str | None:
    """What the class's own ``@validate`` of ``name`` says against ``value``, if anything."""
    probe = HasTraits()
    for klass in cls.mro():
        for handler in vars(klass).values():
            if isinstance(handler, ValidateHandler) and name in handler.trait_names:
                try:
                    handler.func(probe, Bunch(value=value, owner=probe, trait=trait))
                except TraitError as exc:
                    return quote(str(exc), 300)[1:-1]
                except Exception:  # noqa: BLE001, S112 (it needs its instance: checked later)
                    continue
    return None


def _bounds(trait: TraitType[Any, Any]) -> tuple[float, float | None]:
    """A number setting's least and greatest values: 0 unless it says a lower one."""
    low, high = getattr(trait, "min", None), getattr(trait, "max", None)
    least = float(low) if low is not None and math.isfinite(low) else 0.0
    most = float(high) if high is not None and math.isfinite(high) else None
    return least, most


def _allowed(trait: TraitType[Any, Any]) -> str:
    if isinstance(trait, Float | Int):
        low, most = _bounds(trait)
        high = f" and at most {most:g}" if most is not None else ""
        kind = "a whole number" if isinstance(trait, Int) else "a number"
        return f"{kind}, {low:g} or more{high} (not NaN nor infinity)"
    return str(trait.info())


def _purpose(trait: TraitType[Any, Any]) -> str:
    """`` (what the setting is)``: its help's first sentence."""
    text = " ".join((trait.help or "").split())
    first = text.split(". ")[0].rstrip(".")
    if len(first) > 120:
        first = first[:119] + "…"
    return f" ({first})" if first else ""


def _file_setting(files: Iterable[str], section: str, name: str) -> str | None:
    """The last of ``files`` (the one that wins) that sets ``section.name``."""
    found = None
    for path in files:
        loader_class = JSONFileConfigLoader if path.endswith(".json") else PyFileConfigLoader
        directory, filename = os.path.split(path)
        try:
            config = loader_class(filename, path=directory).load_config()
        except Exception:  # noqa: BLE001, S112 (it loaded before; naming it is best effort)
            continue
        if section in config and name in config[section]:
            found = path
    return found


__all__ = [
    "ConfigError",
    "check_config",
    "config_file_candidates",
    "configurable_classes",
    "load_config_files",
    "unloaded_config_file",
]
