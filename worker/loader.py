"""Worker process: loads a Hugging Face checkpoint folder into a Qwen3_5ForCausalLM (memory-mapped safetensors)."""
import torch

from worker.checkpoint_errors import (CheckpointError, MissingFileError, MissingTensorError, TensorShapeError,
                                      UnsupportedModelError)
from worker.config import ModelConfig
from worker.model_card import load_model_card

__all__ = ["load_model", "load_model_card", "CheckpointError", "MissingFileError", "UnsupportedModelError",
           "TensorShapeError", "MissingTensorError"]


def load_model(path: str, device="cpu", dtype=torch.float32, progress=True):
    """Returns (Qwen3_5ForCausalLM, ModelConfig) for the checkpoint folder `path`. Not implemented yet."""
    raise NotImplementedError("load_model: in progress (issue #2)")
