"""/api/v1/sweeps and /api/v1/canaries: start one (bearer token), list them, read a result.

A sweep or a live canary loads real endpoints for minutes: POST answers 202 with the run's id
at once; GET /{id} shows ``running`` until the result (or the error) is recorded.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends

from monitor.api.convert import run_out
from monitor.api.deps import Limit, Offset, StateDep, require_token
from monitor.api.errors import bad_request, not_found
from monitor.api.schemas import (
    ErrorBody,
    LatencySloIn,
    LiveCanaryIn,
    Page,
    RunOut,
    StoredCanaryIn,
    SweepIn,
    WorkloadIn,
)
from monitor.api.state import ServiceState
from monitor.canary.config import CanaryConfigError, load_judge_config, parse_judge_config
from monitor.canary.judge import JudgeConfig
from monitor.canary.run import judge_runs, judge_stored, run_both
from monitor.loadgen.metrics import LatencySlo
from monitor.loadgen.runner import Endpoint, Limits, check_endpoint
from monitor.loadgen.sweep import SweepOptions, sweep
from monitor.loadgen.workload import Arrival, LengthDist, WorkloadError, WorkloadSpec
from monitor.store.runs import count_runs, get_run, list_runs

router = APIRouter(prefix="/api/v1", tags=["runs"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (400, 401, 403, 404, 409, 503)}
_AUTH = [Depends(require_token)]


def workload_of(w: WorkloadIn) -> WorkloadSpec:
    try:
        return WorkloadSpec(input_len=LengthDist.parse(w.input_len, "workload.input_len"),
                            output_len=LengthDist.parse(w.output_len, "workload.output_len"),
                            chat=w.api == "chat", chars_per_token=w.chars_per_token,
                            arrival=Arrival(w.arrival), burstiness=w.burstiness, seed=w.seed)
    except (WorkloadError, ValueError) as exc:
        raise bad_request(str(exc)) from None


def _slo_of(s: LatencySloIn) -> LatencySlo:
    values = (s.ttft_ms, s.tpot_ms, s.e2e_ms)
    if all(v is None for v in values):
        raise bad_request("slo: give at least one of ttft_ms, tpot_ms, e2e_ms")
    return LatencySlo(*(None if v is None else v / 1000 for v in values))


def _judge_of(text: str | None) -> JudgeConfig:
    try:
        return load_judge_config() if text is None else parse_judge_config(text, "judge")
    except CanaryConfigError as exc:
        raise bad_request(str(exc)) from None


def _read(state: ServiceState, kind: str, run_id: str) -> RunOut:
    row = get_run(state.store.engine, run_id)
    if row is None or row.kind != kind:
        raise not_found(kind, run_id)
    return run_out(row)


def _page(state: ServiceState, kind: str, limit: int, offset: int) -> Page[RunOut]:
    rows = list_runs(state.store.engine, kind, limit, offset)
    return Page(items=[run_out(r) for r in rows], total=count_runs(state.store.engine, kind),
                limit=limit, offset=offset)


@router.post("/sweeps", status_code=202, response_model=RunOut, dependencies=_AUTH,
             responses=_ERRORS, summary="Start a rate sweep: max QPS under a latency SLO")
async def start_sweep(state: StateDep, body: SweepIn) -> RunOut:
    endpoint = Endpoint(body.url, body.model, chat=body.workload.api == "chat")
    workload = workload_of(body.workload)
    try:
        options = SweepOptions(
            slo=_slo_of(body.slo), attainment_target=body.attainment,
            start_rate=body.start_rate, growth=body.growth, max_rate=body.max_rate,
            step_seconds=body.step_seconds, warmup_seconds=body.warmup_seconds,
            refine_steps=body.refine_steps, max_concurrency=body.max_concurrency)
    except ValueError as exc:
        raise bad_request(str(exc)) from None

    async def work() -> dict[str, Any]:
        await check_endpoint(endpoint)
        return (await sweep(endpoint, workload, options)).to_json()

    run_id = await state.runs.start("sweep", body.name, body.model_dump(), work)
    return await asyncio.to_thread(_read, state, "sweep", run_id)


@router.get("/sweeps", response_model=Page[RunOut], summary="Sweeps, newest first")
def list_sweeps(state: StateDep, limit: Limit = 100, offset: Offset = 0) -> Page[RunOut]:
    return _page(state, "sweep", limit, offset)


@router.get("/sweeps/{run_id}", response_model=RunOut, responses={404: {"model": ErrorBody}},
            summary="One sweep: running, or its result")
def get_sweep(state: StateDep, run_id: str) -> RunOut:
    return _read(state, "sweep", run_id)


CanaryBody = Annotated[LiveCanaryIn | StoredCanaryIn, Body(discriminator="mode")]


@router.post("/canaries", status_code=202, response_model=RunOut, dependencies=_AUTH,
             responses=_ERRORS, summary="Start a canary judgement: live paired load, or two "
                                        "targets' stored data over a range")
async def start_canary(state: StateDep, body: CanaryBody) -> RunOut:
    config = _judge_of(body.judge)
    work = _live_work(body, config) if isinstance(body, LiveCanaryIn) else \
        _stored_work(state, body, config)
    run_id = await state.runs.start("canary", body.name, body.model_dump(exclude={"judge"}),
                                    work)
    return await asyncio.to_thread(_read, state, "canary", run_id)


def _live_work(body: LiveCanaryIn, config: JudgeConfig) -> Any:
    chat = body.workload.api == "chat"
    baseline = Endpoint(body.baseline_url, body.model, chat=chat)
    canary = Endpoint(body.canary_url, body.canary_model or body.model, chat=chat)
    workload = workload_of(body.workload)
    limits = Limits(duration_seconds=body.duration_seconds, warmup_seconds=body.warmup_seconds)

    async def work() -> dict[str, Any]:
        for endpoint in (baseline, canary):
            await check_endpoint(endpoint)
        base, can = await run_both(baseline, canary, workload, body.rate, limits)
        return judge_runs(base, can, config, body.interval_seconds).to_json()
    return work


def _stored_work(state: ServiceState, body: StoredCanaryIn, config: JudgeConfig) -> Any:
    if body.end <= body.start:
        raise bad_request(f"the range is empty: end {body.end} <= start {body.start}")
    known = {t.name for t in state.store.targets()}
    for name in (body.baseline_target, body.canary_target):
        if name not in known:
            raise not_found("target", name)

    async def work() -> dict[str, Any]:
        comparison = await asyncio.to_thread(
            judge_stored, state.store, body.baseline_target, body.canary_target, body.start,
            body.end, body.step_seconds, config)
        return comparison.to_json()
    return work


@router.get("/canaries", response_model=Page[RunOut], summary="Canaries, newest first")
def list_canaries(state: StateDep, limit: Limit = 100, offset: Offset = 0,
                  ) -> Page[RunOut]:
    return _page(state, "canary", limit, offset)


@router.get("/canaries/{run_id}", response_model=RunOut,
            responses={404: {"model": ErrorBody}}, summary="One canary: running, or its "
                                                           "judgement")
def get_canary(state: StateDep, run_id: str) -> RunOut:
    return _read(state, "canary", run_id)



