"""The configuration in force: ``POST /-/reload`` (bearer token) re-reads inferwatch.yaml and
its SLO files, as SIGHUP does; ``GET /api/v1/status/config`` says what is loaded and how the
last reload went (monitor/service/reload.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from monitor.api.deps import StateDep, require_token
from monitor.api.errors import ApiError
from monitor.api.schemas import (
    ChangesOut,
    ConfigStatusOut,
    ErrorBody,
    HaStatusOut,
    NamesChangedOut,
    ReloadOut,
)
from monitor.service.reload import ReloadFailed, ReloadResult

router = APIRouter(tags=["config"])

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (401, 403, 404, 422)}


def reload_out(result: ReloadResult) -> ReloadOut:
    c = result.changes
    changes = ChangesOut(
        slos=NamesChangedOut(added=list(c.slos_added), changed=list(c.slos_changed),
                             removed=list(c.slos_removed)),
        targets=NamesChangedOut(added=list(c.targets_added), changed=list(c.targets_changed),
                                removed=list(c.targets_removed)),
        restart_required=list(c.restart_required))
    return ReloadOut(at=result.at, trigger=result.trigger,
                     successful=result.successful, seconds=result.seconds, changes=changes,
                     error=result.error, file=result.file, problems=list(result.problems))


@router.post("/-/reload", response_model=ReloadOut, dependencies=[Depends(require_token)],
             responses=_ERRORS, summary="Reload inferwatch.yaml and its SLO files (as SIGHUP)",
             description="Everything is validated before anything is swapped: a bad file "
                         "answers 422 naming the file and each bad field, and the running "
                         "configuration stays. SLOs whose spec is unchanged keep their state; "
                         "alerts carry over.")
async def reload(state: StateDep) -> ReloadOut:
    if state.reloader is None:
        # An API built without a configuration file (in-process tests): nothing to reload.
        raise ApiError(404, "not_found", "this monitor has no configuration file to reload")
    try:
        result = await state.reloader.reload("api")
    except ReloadFailed as exc:
        failed = exc.result
        raise ApiError(422, "invalid_config", failed.error or "invalid configuration",
                       extra={"file": failed.file, "problems": list(failed.problems)}
                       ) from None
    return reload_out(result)


@router.get("/api/v1/status/config", response_model=ConfigStatusOut,
            summary="The configuration in force and the last reload")
def config_status(state: StateDep) -> ConfigStatusOut:
    config = state.config()
    reloader = state.reloader
    return ConfigStatusOut(
        file=str(reloader.watcher.path) if reloader is not None else None,
        slo_files=list(config.slos), targets=[t.name for t in config.targets],
        slos=[s.name for s in state.slos],
        last_reload=reload_out(reloader.last) if reloader is not None else None,
        last_successful_reload_at=reloader.last_success_at if reloader is not None else None)


@router.get("/api/v1/status/ha", response_model=HaStatusOut,
            responses={404: {"model": ErrorBody}},
            summary="This replica's role and which replica is active")
def ha_status(state: StateDep) -> HaStatusOut:
    replica = state.replica
    if replica is None:
        raise ApiError(404, "not_found", "this API runs without a monitor service")
    return HaStatusOut(replica_id=replica.replica_id, role=replica.role.value,
                       elected=replica.elected, since=replica.since,
                       active_replica_id=replica.active_replica(),
                       leader_changes=replica.changes, poll_seconds=replica.poll_seconds,
                       holding=replica.holding)
