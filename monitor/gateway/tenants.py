"""Who sent a request, and the label value it gets under the cardinality budget.

Identity comes from a configured header (its value, e.g. a team name) or else from the API key
in ``Authorization: Bearer ...`` as a short salted hash: the key itself is never stored or
exported, and the salt keeps the hash from being looked up in a table of known keys.

The budget: the ``max_tenants`` tenants with the most requests since the gateway started have
their own label value; everyone else is "other". A tenant that overtakes the smallest of the
top takes its place (the displaced one's series stop growing, its new requests count as
"other"), so at most ``max_tenants`` + 1 values grow at any time. Counts are kept for at
most ``max_tracked`` tenants: past that, the half outside the top with fewest requests is
forgotten (a flood of one-off keys costs no memory, and counts "other").
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Final

OTHER: Final = "other"
ANONYMOUS: Final = "anonymous"  # no key and no header
_HASH_BYTES: Final = 6  # 12 hex digits: collisions unlikely among thousands of keys


def budget_rule(max_tenants: int) -> str:
    """The rule, for the HELP text of every metric with a tenant label."""
    return (f"tenant: the {max_tenants} tenants with the most requests since the gateway "
            f"started have their own value (API key as a salted hash, or the tenant header), "
            f"all others '{OTHER}'")


class TenantIdentifier:
    """The raw identity of a request (a hash or the header's value), before the budget."""

    __slots__ = ("_salt", "_header", "_cache")

    def __init__(self, salt: bytes, header: str | None = None) -> None:
        if not salt:
            raise ValueError("the tenant salt must not be empty")
        self._salt = salt
        self._header = header.lower() if header else None
        self._cache: dict[str, str] = {}  # authorization value -> hash (bounded below)

    def identify(self, headers: Mapping[str, str]) -> str:
        if self._header is not None and (value := headers.get(self._header)):
            return value[:64]
        authorization = headers.get("authorization", "")
        scheme, _, key = authorization.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            return ANONYMOUS
        cached = self._cache.get(authorization)
        if cached is None:
            digest = hmac.new(self._salt, key.strip().encode(), hashlib.sha256).digest()
            cached = "key-" + digest[:_HASH_BYTES].hex()
            if len(self._cache) < 100_000:
                self._cache[authorization] = cached
        return cached


class TenantBudget:
    """Counts requests per tenant and names the label value of each."""

    __slots__ = ("max_tenants", "max_tracked", "_counts", "_top")

    def __init__(self, max_tenants: int, max_tracked: int = 100_000) -> None:
        if max_tenants < 0:
            raise ValueError(f"max_tenants must be >= 0, got {max_tenants}")
        if max_tracked <= max_tenants:
            raise ValueError("max_tracked must exceed max_tenants")
        self.max_tenants = max_tenants
        self.max_tracked = max_tracked  # counts kept; many one-off keys must not grow memory
        self._counts: dict[str, int] = {}
        self._top: set[str] = set()

    def label(self, tenant: str) -> str:
        """Count one request of ``tenant`` and return its label value."""
        count = self._counts.get(tenant, 0) + 1
        self._counts[tenant] = count
        if len(self._counts) > self.max_tracked:
            self._forget_smallest()
        if tenant in self._top:
            return tenant
        if len(self._top) < self.max_tenants:
            self._top.add(tenant)
            return tenant
        if not self._top:
            return OTHER
        smallest = min(self._top, key=self._counts.__getitem__)
        if count > self._counts[smallest]:
            self._top.discard(smallest)
            self._top.add(tenant)
            return tenant
        return OTHER

    def _forget_smallest(self) -> None:
        """Drop the half of the tracked tenants outside the top with the fewest requests."""
        outside = sorted((c, t) for t, c in self._counts.items() if t not in self._top)
        for _, tenant in outside[:len(outside) // 2]:
            del self._counts[tenant]

    @property
    def top(self) -> frozenset[str]:
        return frozenset(self._top)
