"""Prometheus' metric relabeling (the actions the generated jobs use: replace, keep, drop,
labeldrop) applied in Python to one series' labels, to count what a scrape would store
without running a scraper. Regexes are anchored as Prometheus anchors them; Go's RE2 syntax
in the generated configs is the subset Python's ``re`` reads the same way."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

_GROUP_RE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@lru_cache(maxsize=4096)
def _anchored(regex: str) -> re.Pattern[str]:
    return re.compile(f"^(?:{regex})$")


def _expand(match: re.Match[str], replacement: str) -> str:
    def group(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        try:
            value = match.group(int(name)) if name.isdigit() else match.group(name)
        except IndexError:  # a group the regex lacks expands to "", as in Go
            return ""
        return value or ""
    return _GROUP_RE.sub(group, replacement)


def relabel(labels: Mapping[str, str], configs: Sequence[Mapping[str, Any]]
            ) -> dict[str, str] | None:
    """The labels after ``configs``, or None where a keep or drop removed the series."""
    out = dict(labels)
    for config in configs:
        action = config.get("action", "replace")
        regex = _anchored(config.get("regex", "(.*)"))
        if action == "labeldrop":
            out = {k: v for k, v in out.items() if not regex.match(k)}
            continue
        value = config.get("separator", ";").join(
            out.get(name, "") for name in config.get("source_labels", []))
        match = regex.match(value)
        if action == "keep" and not match or action == "drop" and match:
            return None
        if action == "replace" and match:
            target = config["target_label"]
            result = _expand(match, config.get("replacement", "$1"))
            if result:
                out[target] = result
            else:
                out.pop(target, None)
        elif action not in ("keep", "drop", "replace"):
            raise ValueError(f"relabel action {action!r} is not simulated")
    return out
