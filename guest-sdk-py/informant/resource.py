"""Kubernetes kinds as the contract names them."""

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Resource:
    """A kind: ``group`` is empty for the core group (``v1``)."""

    group: str
    version: str
    kind: str

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> "Resource":
        """``Resource.from_api_version("apps/v1", "Deployment")``, as a manifest's watch names it."""
        group, _, version = api_version.rpartition("/")
        if not version:
            raise ValueError(f"api version `{api_version}` names no version")
        return cls(group, version, kind)

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, ``group/version`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def __str__(self) -> str:
        return f"{self.api_version}/{self.kind}"
