"""Latency SLOs bound to the engine they read (issue 30): ``rules generate --engine vllm``,
``--page`` (edges read off a live /metrics page) and a config's targets all end here, so the
rules, their promtool tests and the monitor count at the edges that engine really has."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from monitor.slo.spec import LatencySli, Slo


class EngineBindError(ValueError):
    """An SLO that cannot be counted on the engine it was bound to."""


def bind_engine(slos: Sequence[Slo], engine: str,
                page_edges: Mapping[str, Sequence[float]] | None = None) -> list[Slo]:
    """Each latency SLO that names no engine of its own, bound to ``engine`` (its histogram's
    edges as ``page_edges`` has them, where given) and validated again: a threshold off that
    engine's edges is refused unless the SLO says ``off_edge: lower_edge``."""
    def bind(slo: Slo, sli: LatencySli) -> Slo:
        fields = {**sli.model_dump(), "engine": engine}
        if page_edges is not None and page_edges.get(sli.histogram):
            fields["edges"] = tuple(page_edges[sli.histogram])
        try:
            return Slo.model_validate({**slo.model_dump(), "sli": fields})
        except ValidationError as exc:
            reasons = "; ".join(str(e["msg"]).removeprefix("Value error, ")
                                for e in exc.errors())
            raise EngineBindError(f"SLO {slo.name}: {reasons}") from None

    return _each_unbound(slos, bind)


def _each_unbound(slos: Sequence[Slo], bind: Callable[[Slo, LatencySli], Slo]) -> list[Slo]:
    """``bind`` applied to each latency SLO that names no engine; the others as they are."""
    return [bind(slo, slo.sli) if isinstance(slo.sli, LatencySli) and slo.sli.engine is None
            else slo for slo in slos]


def bind_to_targets(slos: Sequence[Slo],
                    targets: Sequence[tuple[str, Mapping[str, str], str]]) -> list[Slo]:
    """Each latency SLO that names no engine, checked against the engines of the targets it
    selects (``(name, labels, engine)``, from inferwatch.yaml) and bound to their engine when
    they declare one, the same, and none is ``auto`` (found at run time; the monitor then
    counts at the stored edges and says so). Targets of several engines: the threshold must
    be countable on each, and where they count it at different edges the SLO is refused (one
    rule cannot read two ``le``): split it by selector."""
    from monitor.store import Selector

    def bind(slo: Slo, sli: LatencySli) -> Slo:
        selector = Selector(slo.selector.target, slo.selector.labels)
        engines = sorted({engine for name, labels, engine in targets
                          if selector.matches(name, labels)})
        known = [e for e in engines if e != "auto"]
        per_engine = [bind_engine([slo], engine)[0] for engine in known]
        edges = sorted({s.sli.counted_at.edge for s in per_engine
                        if isinstance(s.sli, LatencySli)}, key=lambda e: e or 0.0)
        if len(edges) > 1:
            raise EngineBindError(
                f"SLO {slo.name}: its targets run {', '.join(known)}, which count "
                f"{sli.threshold_seconds:g}s at different edges "
                f"({', '.join(f'{e:g}s' if e is not None else 'none' for e in edges)}"
                "): one SLO per engine (selector.labels)")
        return per_engine[0] if len(known) == 1 and engines == known else slo

    return _each_unbound(slos, bind)


def bind_for(slos: Sequence[Slo], engine: str | None, page: str | None) -> list[Slo]:
    """The SLOs bound to ``engine`` and/or the engine and edges of ``page`` (a /metrics file
    or an http(s) URL), as the ``--engine`` and ``--page`` options give them; unchanged when
    neither is given. OSError when the page cannot be read, ValueError when it is not the
    engine named, EngineBindError when an SLO cannot be counted on it."""
    from exporters.adapters.edges import page_edges

    edges = None
    if page is not None:
        found, edges = page_edges(_read_page(page), page)
        if engine is not None and engine != found:
            raise ValueError(f"--page {page} is a {found} page, not {engine}")
        engine = found
    return list(slos) if engine is None else bind_engine(slos, engine, edges)


def _read_page(page: str) -> str:
    if page.startswith(("http://", "https://")):
        import httpx

        try:
            response = httpx.get(page, timeout=10.0)
            response.raise_for_status()
        except httpx.HTTPError as exc:
            raise OSError(f"--page {page}: {exc}") from None
        return response.text
    return Path(page).read_text(encoding="utf-8")
