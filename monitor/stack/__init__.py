"""The whole inferwatch stack on one machine, as `inferwatch demo` runs it: launchers for the
child processes (reference server, monitor service, Prometheus, Alertmanager) in process
groups of their own, a built-in alert receiver, a load that rises and falls, a fault, and the
live terminal display."""

from monitor.stack.faults import FaultPlan
from monitor.stack.launch import Stack, StackOptions
from monitor.stack.load import LoadShape
from monitor.stack.processes import Child, ChildError, Service
from monitor.stack.receiver import AlertReceiver, Notice
from monitor.stack.reference import reference_server, start_reference_server
from monitor.stack.session import DemoOptions, run_demo

__all__ = [
    "AlertReceiver",
    "Child",
    "ChildError",
    "DemoOptions",
    "FaultPlan",
    "LoadShape",
    "Notice",
    "Service",
    "Stack",
    "StackOptions",
    "reference_server",
    "run_demo",
    "start_reference_server",
]
