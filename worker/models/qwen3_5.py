"""Worker process: the Qwen3.5 dense hybrid (Gated DeltaNet + gated attention) forward over a packed batch."""
import torch

from worker.batch import ForwardBatch
from worker.cache import ModelCache
from worker.config import ModelConfig


class Qwen3_5ForCausalLM(torch.nn.Module):
    """forward(batch, cache, all_logits=False) -> logits [M, V] float32 (rows batch.logits_rows), or [T, V]."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config

    def forward(self, batch: ForwardBatch, cache: ModelCache, all_logits: bool = False) -> torch.Tensor:
        raise NotImplementedError("Qwen3_5ForCausalLM.forward: in progress (issue #2)")
