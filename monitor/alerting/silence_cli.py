"""`inferwatch silence`: maintenance windows as Alertmanager silences (add, list, expire).

    inferwatch silence add --matcher slo=chat-ttft --duration 2h --comment "maintenance"
    inferwatch silence list
    inferwatch silence expire ID

The Alertmanager is --alertmanager-url, else $INFERWATCH_ALERTMANAGER_URL, else
http://127.0.0.1:9093. `add` prints only the new silence's ID on stdout (for scripts; the
summary goes to stderr). Exit status: 0 done, 1 Alertmanager unreachable or refusing, 2 bad
arguments.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from monitor.alerting.alertmanager import (
    AlertmanagerError,
    Silence,
    SyncAlertmanagerClient,
    parse_matcher,
)
from monitor.slo.durations import format_duration, parse_duration

URL_ENV: Final = "INFERWATCH_ALERTMANAGER_URL"
DEFAULT_URL: Final = "http://127.0.0.1:9093"
_STATE_ORDER: Final = {"active": 0, "pending": 1, "expired": 2}


def add_arguments(p: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--alertmanager-url", default=None,
                        help=f"Alertmanager base URL (default: ${URL_ENV} or {DEFAULT_URL})")
    common.add_argument("--timeout", type=float, default=5.0, help="seconds per request")
    actions = p.add_subparsers(dest="silence_action", required=True)

    add = actions.add_parser("add", parents=[common], help="silence matching alerts for a while")
    add.add_argument("--matcher", "-m", action="append", required=True,
                     help="name=value, name!=value, name=~regex or name!~regex; repeat to "
                          "require all")
    add.add_argument("--duration", required=True, help="how long: 30m, 2h, 1d...")
    add.add_argument("--start", default=None,
                     help="ISO 8601 start with a UTC offset, e.g. 2025-06-01T22:00+02:00 "
                          "(default: now)")
    add.add_argument("--comment", required=True, help="why (shown to whoever gets no page)")
    add.add_argument("--author", default=None, help="who (default: the current user)")

    ls = actions.add_parser("list", parents=[common], help="show active and pending silences")
    ls.add_argument("--matcher", "-m", action="append", default=[],
                    help="only silences with this matcher (repeatable)")
    ls.add_argument("--expired", action="store_true", help="include expired silences")

    expire = actions.add_parser("expire", parents=[common], help="end silences now")
    expire.add_argument("ids", nargs="+", metavar="ID")


def run(args: argparse.Namespace) -> int:
    url = args.alertmanager_url or os.environ.get(URL_ENV) or DEFAULT_URL
    action: Callable[[SyncAlertmanagerClient, argparse.Namespace], int] = _ACTIONS[
        args.silence_action]
    try:
        with SyncAlertmanagerClient(url, timeout=args.timeout) as client:
            return action(client, args)
    except AlertmanagerError as exc:
        print(f"inferwatch silence: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a matcher, duration, time or URL that cannot be used
        print(f"inferwatch silence: {exc}", file=sys.stderr)
        return 2


def _add(client: SyncAlertmanagerClient, args: argparse.Namespace) -> int:
    matchers = [parse_matcher(m) for m in args.matcher]
    seconds = parse_duration(args.duration)
    starts = _parse_start(args.start) if args.start else datetime.now(UTC)
    ends = starts + timedelta(seconds=seconds)
    silence_id = client.create_silence(matchers, starts, ends, args.author or _user(),
                                       args.comment)
    print(silence_id)
    print(f"silenced {' '.join(map(str, matchers))} from {_when(starts)} until {_when(ends)} "
          f"({format_duration(seconds)})", file=sys.stderr)
    return 0


def _list(client: SyncAlertmanagerClient, args: argparse.Namespace) -> int:
    silences = [s for s in client.list_silences([parse_matcher(m) for m in args.matcher])
                if args.expired or s.state != "expired"]
    if not silences:
        print("no silences" if args.expired else "no active or pending silences")
        return 0
    silences.sort(key=lambda s: (_STATE_ORDER.get(s.state, 3), s.ends_at, s.id))
    print(_table(silences))
    return 0


def _expire(client: SyncAlertmanagerClient, args: argparse.Namespace) -> int:
    status = 0
    for silence_id in args.ids:
        try:
            client.expire_silence(silence_id)
        except (AlertmanagerError, ValueError) as exc:
            print(f"inferwatch silence: {exc}", file=sys.stderr)
            status = max(status, 1 if isinstance(exc, AlertmanagerError) else 2)
        else:
            print(f"expired {silence_id}")
    return status


_ACTIONS: Final[dict[str, Callable[[SyncAlertmanagerClient, argparse.Namespace], int]]] = {
    "add": _add, "list": _list, "expire": _expire}


def _parse_start(text: str) -> datetime:
    try:
        start = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--start {text!r} is not an ISO 8601 time") from None
    if start.tzinfo is None:  # a maintenance window an hour off is worse than an error
        raise ValueError(f"--start {text!r} has no UTC offset; add one, e.g. "
                         f"{text.strip()}Z or {text.strip()}+02:00")
    return start.astimezone(UTC)


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no $USER and no passwd entry (containers)
        return "inferwatch"


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _table(silences: Sequence[Silence]) -> str:
    header = ("ID", "STATE", "STARTS (UTC)", "ENDS (UTC)", "AUTHOR", "MATCHERS", "COMMENT")
    rows = [header] + [
        (s.id, s.state, s.starts_at.strftime("%Y-%m-%d %H:%M"),
         s.ends_at.strftime("%Y-%m-%d %H:%M"), s.created_by,
         " ".join(map(str, s.matchers)), " ".join(s.comment.split()))
        for s in silences]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    return "\n".join("  ".join([*(cell.ljust(w) for cell, w in zip(row, widths)), row[-1]])
                     for row in rows)
