"""SLO spec files into ``Slo``: native YAML, OpenSLO v1 and Sloth prometheus/v1.

``load_slos`` reads one file (possibly several YAML documents) or every ``*.yaml``/``*.yml``
of a directory, and tells each document's format by its top-level keys:

- ``apiVersion: openslo/v1``: an OpenSLO object (``monitor.slo.openslo``); ``*Ref`` fields
  may name objects of any loaded file;
- ``version: prometheus/v1``: a Sloth spec (``monitor.slo.sloth``);
- ``slos:`` alone: native, a list of mappings that are ``Slo`` fields as they are::

      slos:
        - {name: chat-ttft, objective: 0.99, window: 30d,
           sli: {kind: latency, metric: ttft, threshold_seconds: 200ms}}

Every problem of every file is collected before one ``SloFileError`` is raised, each naming
its document and field, so a CI run shows all of them at once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import yaml

from monitor.slo import openslo, sloth
from monitor.slo.documents import (
    At,
    Doc,
    Draft,
    Origin,
    Problem,
    SpecError,
    mapping,
    sequence,
)
from monitor.slo.spec import Slo
from monitor.slo.windows import burn_windows

_SUFFIXES = (".yaml", ".yml")


class SloFileError(Exception):
    """SLO spec files that cannot be used; the message names the file and every bad field."""

    def __init__(self, source: str, problems: Sequence[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        lines = "\n".join(f"  {problem}" for problem in self.problems)
        super().__init__(f"{source}: invalid SLO spec:\n{lines}")


def load_slos(path: str | os.PathLike[str]) -> list[Slo]:
    """The SLOs of a spec file, or of every spec file of a directory (by file name), in the
    order they are written. SloFileError lists every problem found."""
    root = Path(path)
    problems: list[Problem] = []
    docs: list[Doc] = []
    files = _files(root, problems)
    for file in files:
        docs += _documents(file, problems)
    registry = openslo.Registry()
    formats: list[tuple[str, Doc]] = []
    for doc in docs:  # every OpenSLO object is registered before any reference is resolved
        try:
            kind = _format(doc)
            formats.append((kind, registry.add(doc) if kind == "openslo" else doc))
        except SpecError as exc:
            problems += exc.problems
    drafts: list[Draft] = []
    for kind, doc in formats:
        try:
            drafts += _drafts(kind, doc, registry)
        except SpecError as exc:
            problems += exc.problems
    slos = _build(drafts, problems)
    if problems:
        order = {str(file): i for i, file in enumerate(files)}
        problems = sorted(dict.fromkeys(problems),
                          key=lambda p: (order.get(p.source, -1), p.index))
        raise _error(root, problems)
    return slos


def _files(root: Path, problems: list[Problem]) -> list[Path]:
    if root.is_dir():
        return sorted(p for p in root.iterdir() if p.suffix in _SUFFIXES and p.is_file())
    if not root.exists():
        problems.append(Problem(str(root), "", "", "no such file or directory"))
        return []
    return [root]


def _documents(path: Path, problems: list[Problem]) -> list[Doc]:
    try:
        datas = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(str(path), "", "", f"cannot read the file: {exc}"))
        return []
    except yaml.MarkedYAMLError as exc:
        problems.append(Problem(str(path), "", "", f"not valid YAML{_yaml_place(exc)}"))
        return []
    except yaml.YAMLError as exc:
        problems.append(Problem(str(path), "", "", f"not valid YAML: {exc}"))
        return []
    return [Doc(str(path), i + 1, len(datas), data)
            for i, data in enumerate(datas) if data is not None]


def _yaml_place(exc: yaml.MarkedYAMLError) -> str:
    """' at line 4, column 1: expected ... (while parsing a flow sequence from line 3)'."""
    text = ""
    if exc.problem_mark is not None:
        text += f" at line {exc.problem_mark.line + 1}, column {exc.problem_mark.column + 1}"
    text += f": {exc.problem or exc.context}"
    if exc.problem and exc.context and exc.context_mark is not None:
        text += f" ({exc.context} from line {exc.context_mark.line + 1})"
    return text


def _format(doc: Doc) -> str:
    data = doc.data
    if isinstance(data, dict):
        if "apiVersion" in data:
            return "openslo"
        if "version" in data:
            return "sloth"
        if "slos" in data:
            return "native"
    raise At(doc).error("not an SLO spec: expected a mapping with slos: (native), apiVersion: "
                        f"{openslo.API_VERSION} (OpenSLO) or version: {sloth.VERSION} (Sloth)")


def _drafts(kind: str, doc: Doc, registry: openslo.Registry) -> list[Draft]:
    if kind == "native":
        return _native(doc)
    if kind == "sloth":
        return sloth.slo_drafts(doc)
    if doc.data["kind"] == "SLO":
        return openslo.slo_drafts(doc, registry)
    return []  # SLI, AlertPolicy, ...: read where an SLO refers to them


def _native(doc: Doc) -> list[Draft]:
    root = At(doc)
    data = mapping(doc.data, root, ("slos",), ("slos",))
    return [Draft(item, {(): Origin(root / "slos" / i, nested=True)})
            for i, item in enumerate(sequence(data["slos"], root / "slos"))]


def _build(drafts: list[Draft], problems: list[Problem]) -> list[Slo]:
    """Validated SLOs; a name used twice is a problem at its second place."""
    slos: list[Slo] = []
    first: dict[str, At] = {}
    for draft in drafts:
        try:
            slo = draft.build()
        except SpecError as exc:
            problems += exc.problems
            continue
        at = draft.locate(("name",))
        if slo.name in first:
            earlier = first[slo.name]
            place = ", ".join(p for p in (earlier.doc.where, earlier.path) if p)
            problems.append(Problem.at(at, f"duplicate SLO name {slo.name!r}, first defined in "
                                           f"{earlier.doc.source}: {place}"))
            continue
        try:  # its alert windows fit its period (monitor.slo.windows' guard rails)
            burn_windows(slo)
        except ValueError as exc:
            problems.append(Problem.at(draft.locate(("window",)), str(exc)))
            continue
        first[slo.name] = at
        slos.append(slo)
    return slos


def _error(root: Path, problems: list[Problem]) -> SloFileError:
    sources = {p.source for p in problems}
    if len(sources) == 1:
        return SloFileError(sources.pop(), [str(p) for p in problems])
    return SloFileError(str(root), [f"{p.source}: {p}" for p in problems])
