"""The monitor as a long-running service: `inferwatch serve`.

    cli.py         the command: arguments, config and SLO files, the banner
    process.py     one event loop running the collector, the evaluation loop and the API
    evaluation.py  the evaluation loop wired from the config: SLOs, anomalies and headroom
                   into one alert book, notifications to Alertmanager
    reload.py      inferwatch.yaml and its SLO files applied live (SIGHUP, POST /-/reload)
"""
