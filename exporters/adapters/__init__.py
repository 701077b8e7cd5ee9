"""Engine adapters: table-driven mappings of engine /metrics pages onto the inferwatch schema.

The tables are data (mappings/<engine>.yaml); ``normalize`` applies one to a page parsed by
``exporters.exposition.parse_page``, ``detect_engine`` picks the table from the metric names.
``exporters.adapters.coverage`` says whether every family on a page is decided (mapped, not
mapped or ignored).
"""

from exporters.adapters.detect import detect_engine, detect_engines
from exporters.adapters.normalize import (
    NormalizedFamily,
    NormalizedPage,
    NormalizedSample,
    check_extra_labels,
    normalize,
    normalize_engines,
)
from exporters.adapters.table import (
    AdapterError,
    EngineTable,
    MappingTableError,
    Row,
    UnknownEngine,
    get_table,
    load_table,
    load_tables,
)

__all__ = [
    "AdapterError",
    "EngineTable",
    "MappingTableError",
    "NormalizedFamily",
    "NormalizedPage",
    "NormalizedSample",
    "Row",
    "UnknownEngine",
    "check_extra_labels",
    "detect_engine",
    "detect_engines",
    "get_table",
    "load_table",
    "load_tables",
    "normalize",
    "normalize_engines",
]
