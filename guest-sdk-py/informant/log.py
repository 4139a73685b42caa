"""Logging into the host's log, tagged with the plugin's name and tenant."""

from enum import IntEnum

from . import _backend


class Level(IntEnum):
    """Severity, in the contract's order."""

    TRACE = 0
    DEBUG = 1
    INFO = 2
    WARN = 3
    ERROR = 4


def log(level: Level, message: str) -> None:
    """Writes one log record."""
    _backend.current.log(int(level), str(message))


def trace(message: str) -> None:
    """Logs at trace level."""
    log(Level.TRACE, message)


def debug(message: str) -> None:
    """Logs at debug level."""
    log(Level.DEBUG, message)


def info(message: str) -> None:
    """Logs at info level."""
    log(Level.INFO, message)


def warn(message: str) -> None:
    """Logs at warn level."""
    log(Level.WARN, message)


def error(message: str) -> None:
    """Logs at error level."""
    log(Level.ERROR, message)
