"""Spec documents, places in them, and SLOs drafted from them.

Every format is first translated into the fields of ``Slo`` and then validated once, so the
model's rules hold whatever the format. ``Draft.origins`` remembers where each field came
from, so a validation error names the place in the user's document
(``spec.objectives[0].target``), not a field of our model the user never wrote.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from pydantic import ValidationError

from monitor.slo import spec
from monitor.slo.durations import parse_duration

Loc = tuple[str | int, ...]

_SLI_KINDS: Final = ("latency", "availability", "throughput", "ratio", "goodput")
_MODELS: Final = (spec.Slo, spec.LatencySli, spec.AvailabilitySli, spec.ThroughputSli,
                  spec.RatioSli, spec.GoodputSli, spec.CounterQuery, spec.TimeWindow, spec.Selector,
                  spec.Alerting, spec.ExplicitWindow)
_MODEL_KEYS: Final = sorted({name for model in _MODELS for name in model.model_fields})


@dataclass(frozen=True, eq=False)
class Doc:
    """One YAML document of a spec file."""

    source: str  # the file
    index: int  # 1-based, in its file
    count: int  # documents in its file
    data: Any
    title: str = ""  # "SLO chat-ttft" for an OpenSLO object

    @property
    def where(self) -> str:
        """'document 2 (SLO chat-ttft)'; the number only when the file has several."""
        number = f"document {self.index}" if self.count > 1 else ""
        if number and self.title:
            return f"{number} ({self.title})"
        return number or self.title


@dataclass(frozen=True)
class At:
    """A field of a document by its path: ``At(doc) / "spec" / "objectives" / 0``."""

    doc: Doc
    path: str = ""

    def __truediv__(self, key: str | int) -> At:
        if isinstance(key, int):
            return At(self.doc, f"{self.path}[{key}]")
        return At(self.doc, f"{self.path}.{key}" if self.path else key)

    def error(self, message: str) -> SpecError:
        return SpecError([Problem.at(self, message)])


@dataclass(frozen=True)
class Problem:
    """One thing wrong, located: file, document, field path."""

    source: str
    where: str
    path: str
    message: str
    index: int = 0  # the document's, to report problems in document order

    @classmethod
    def at(cls, at: At, message: str) -> Problem:
        return cls(at.doc.source, at.doc.where, at.path, message, at.doc.index)

    def __str__(self) -> str:
        return ": ".join(part for part in (self.where, self.path, self.message) if part)


class SpecError(Exception):
    """A document that cannot be made into SLOs; collected by the loader, never shown raw."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(p) for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class Origin:
    """Where a draft's field came from. ``nested``: the field's own keys are the document's
    keys under ``at`` (an error at ``sli.metric`` is at ``<at>.metric``); otherwise the whole
    field was read from ``at`` (a threshold read from a PromQL query)."""

    at: At
    nested: bool = False


@dataclass
class Draft:
    """The fields of one ``Slo``, not yet validated, and where each came from.
    ``origins[()]`` must be given: errors about the whole SLO are reported there."""

    fields: object
    origins: dict[Loc, Origin] = field(default_factory=dict)

    def locate(self, loc: Loc) -> At:
        """The document field an error at ``loc`` of the model is about."""
        for cut in range(len(loc), -1, -1):
            origin = self.origins.get(loc[:cut])
            if origin is not None:
                at = origin.at
                if origin.nested:
                    for part in loc[cut:]:
                        at = at / part
                return at
        raise KeyError("a draft needs origins[()]")

    def build(self) -> spec.Slo:
        """The validated ``Slo``; SpecError naming the document fields that are wrong."""
        try:
            return spec.Slo.model_validate(self.fields)
        except ValidationError as exc:
            raise SpecError([
                Problem.at(self.locate(_model_loc(error)), _describe(error))
                for error in exc.errors()]) from None


def _model_loc(error: Mapping[str, Any]) -> Loc:
    """Pydantic's loc without the SLI union's tag: ('sli', 'latency', 'metric') is
    ('sli', 'metric'). The latency SLI's only model-level check is its bucket bound."""
    loc = tuple(error["loc"])
    if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return (*loc, "kind")
    if len(loc) >= 2 and loc[0] == "sli" and loc[1] in _SLI_KINDS:
        if loc == ("sli", "latency"):
            return ("sli", "threshold_seconds")
        return ("sli", *loc[2:])
    return tuple(loc)


def _describe(error: Mapping[str, Any]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        return "unknown key" + did_you_mean(str(error["loc"][-1]), _MODEL_KEYS)
    if kind == "value_error":
        return str(error["ctx"]["error"])  # our own message, without pydantic's prefix
    if kind == "union_tag_invalid":
        return f"unknown SLI kind {error['ctx']['tag']!r}; expected one of {', '.join(_SLI_KINDS)}"
    if kind == "union_tag_not_found":
        return f"required: one of {', '.join(_SLI_KINDS)}"
    if kind == "missing":
        return "required"
    got = repr(error["input"])
    return f"{error['msg']} (got {got if len(got) <= 80 else got[:77] + '...'})"


def did_you_mean(key: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


# --- reading raw YAML values, each error at its field --------------------------------------

def type_name(value: object) -> str:
    return "nothing" if value is None else type(value).__name__


def mapping(value: object, at: At, allowed: Collection[str] | None = None,
            required: Collection[str] = ()) -> dict[str, Any]:
    """``value`` as a mapping with string keys, only ``allowed`` ones and all ``required``."""
    if not isinstance(value, dict):
        raise at.error(f"expected a mapping, got {type_name(value)}")
    for key in value:
        if not isinstance(key, str):
            raise at.error(f"keys must be strings, got {key!r}")
        if allowed is not None and key not in allowed:
            raise (at / key).error("unknown key" + did_you_mean(key, allowed))
    for key in required:
        if key not in value:
            raise (at / key).error("required")
    return value


def sequence(value: object, at: At) -> list[Any]:
    if not isinstance(value, list):
        raise at.error(f"expected a list, got {type_name(value)}")
    return value


def string(value: object, at: At) -> str:
    if not isinstance(value, str) or not value:
        raise at.error(f"expected a non-empty string, got {value!r}")
    return value


def number(value: object, at: At) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise at.error(f"expected a number, got {value!r}")
    return float(value)


def duration(value: object, at: At) -> float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise at.error(f"expected a duration like 5m or 1h, got {value!r}")
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise at.error(str(exc)) from None


def percent(value: object, at: At) -> float:
    """99.9 -> 0.999 exactly (decimal division: 99.9 / 100 is 0.9990000000000001 in floats)."""
    return float(Decimal(str(number(value, at))) / 100)


def label_values(value: object, at: At) -> dict[str, str]:
    """Labels as strings: YAML's ``true`` is "true", a list (OpenSLO) is joined with ","."""
    if value is None:
        return {}
    out = {}
    for key, item in mapping(value, at).items():
        items = item if isinstance(item, list) else [item]
        out[key] = ",".join(_scalar(x, at / key) for x in items)
    return out


def _scalar(value: object, at: At) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise at.error(f"a label value is a string, got {type_name(value)}")
