"""Load and save HF-format Llama checkpoints (config.json + safetensors, single or sharded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from reference_server.model import LlamaForCausalLM, ModelConfig

CONFIG_FILE = "config.json"
SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
_MAX_NAMES_SHOWN = 5
# Tensors some checkpoints carry that this model recomputes instead of loading.
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def load_hf_checkpoint(model_dir: str | Path, dtype: torch.dtype = torch.float32,
                       device: str | torch.device = "cpu") -> LlamaForCausalLM:
    """Builds a LlamaForCausalLM from a HF checkpoint directory, in `dtype` on `device`."""
    root = Path(model_dir)
    if not root.is_dir():
        raise ValueError(f"model directory {root} does not exist or is not a directory")
    config = _read_config(root / CONFIG_FILE)
    tensors = _read_tensors(root, dtype)
    with torch.device("meta"):  # no point initializing weights that are about to be replaced
        model = LlamaForCausalLM(config)
    state = _match_state_dict(model, tensors, root)
    model.load_state_dict(state, strict=True, assign=True)
    model.tie_weights()  # assign=True replaced the shared parameter with two separate ones
    return model.to(device).eval()


def _read_config(path: Path) -> ModelConfig:
    if not path.is_file():
        raise ValueError(f"{path} not found: a HF checkpoint directory needs a config.json")
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not readable JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ValueError(f"{path} must contain a JSON object")
    try:
        return ModelConfig.from_hf_dict(raw)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc


def _safetensors_files(root: Path) -> list[Path]:
    index = root / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{index} is not a valid safetensors index: {exc}") from exc
        files = [root / name for name in sorted(set(weight_map.values()))]
    else:
        files = sorted(root.glob("*.safetensors"))
    if not files:
        raise ValueError(f"no *.safetensors weights in {root} (other formats, e.g. "
                         "pytorch_model.bin, are not supported)")
    for file in files:
        if not file.is_file():
            raise ValueError(f"{file} is listed in {index} but does not exist")
    return files


def _read_tensors(root: Path, dtype: torch.dtype) -> dict[str, tuple[torch.Tensor, Path]]:
    """name -> (tensor converted to dtype, file it came from)."""
    tensors: dict[str, tuple[torch.Tensor, Path]] = {}
    for file in _safetensors_files(root):
        try:
            with safe_open(str(file), framework="pt", device="cpu") as handle:
                for name in handle.keys():
                    if name.endswith(_IGNORED_SUFFIXES):
                        continue
                    if name in tensors:
                        raise ValueError(f"tensor {name!r} appears in both {tensors[name][1]} "
                                         f"and {file}")
                    tensors[name] = (handle.get_tensor(name).to(dtype), file)
        except (OSError, SafetensorError) as exc:
            raise ValueError(f"cannot read safetensors file {file}: {exc}") from exc
    return tensors


def _match_state_dict(model: LlamaForCausalLM, tensors: dict[str, tuple[torch.Tensor, Path]],
                      root: Path) -> dict[str, torch.Tensor]:
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    tied = model.config.tie_word_embeddings
    if tied:
        # Tied checkpoints usually omit lm_head.weight; when present it is the same matrix.
        tensors = {k: v for k, v in tensors.items() if k != "lm_head.weight"}
        del expected["lm_head.weight"]
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing:
        raise ValueError(f"checkpoint {root} is missing {len(missing)} tensor(s): "
                         f"{_few(missing)}")
    if unexpected:
        raise ValueError(f"checkpoint {root} has {len(unexpected)} unexpected tensor(s) "
                         f"(not a plain Llama layout?): {_few(unexpected)}")
    for name, shape in expected.items():
        tensor, file = tensors[name]
        if tuple(tensor.shape) != shape:
            raise ValueError(f"tensor {name!r} in {file} has shape {tuple(tensor.shape)}, "
                             f"config.json implies {shape}")
    state = {name: tensors[name][0] for name in expected}
    if tied:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    return state


def _few(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_NAMES_SHOWN])
    return shown + (", ..." if len(names) > _MAX_NAMES_SHOWN else "")


def save_hf_checkpoint(model: LlamaForCausalLM, model_dir: str | Path) -> None:
    """Writes config.json + model.safetensors loadable by transformers' from_pretrained."""
    root = Path(model_dir)
    root.mkdir(parents=True, exist_ok=True)
    state = {name: t.detach().to("cpu").contiguous() for name, t in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        del state["lm_head.weight"]  # safetensors refuses shared storage; HF re-ties on load
    save_file(state, str(root / SINGLE_FILE), metadata={"format": "pt"})
    config = model.config.to_hf_dict()
    config["torch_dtype"] = str(model.lm_head.weight.dtype).removeprefix("torch.")
    (root / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
