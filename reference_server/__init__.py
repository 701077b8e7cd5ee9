"""The reference continuous-batching LLM server: inferwatch's testbed engine."""

from reference_server.config import EngineConfig

__all__ = ["EngineConfig"]
