"""Exceptions a plugin raises or catches: cache query refusals and retry requests."""


class QueryError(Exception):
    """A cache query the host refused; the subclass says why, the message says what."""


class Forbidden(QueryError):
    """Outside what this plugin's tenant was granted, or a name no object can have."""


class NotWatched(QueryError):
    """The host does not watch this resource for this plugin (the manifest must name it)."""


class BadSelector(QueryError):
    """The label selector does not parse; the message says where."""


class UnknownIndex(QueryError):
    """No index of that name is declared for this resource."""


class Retry(Exception):
    """Raise from a handler to have the host redeliver the object's latest state later.

    The host backs off per object (at least ``after_ms`` when given), up to the manifest's
    ``retry.max-attempts``; a newer event for the object replaces a pending retry.
    """

    def __init__(self, reason: str, after_ms: "int | None" = None):
        super().__init__(reason)
        if after_ms is not None and not (0 <= after_ms < 2**32):
            raise ValueError(f"Retry after_ms must fit in a u32, got {after_ms}")
        self.reason = reason
        self.after_ms = after_ms
