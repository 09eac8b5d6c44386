"""Worker process: memory-mapped, lazily opened safetensors shards of a Hugging Face checkpoint folder."""
import json
import os

import torch
from safetensors import safe_open

from worker.checkpoint_errors import MissingFileError, MissingTensorError, check_not_lfs_pointer

INDEX_FILE = "model.safetensors.index.json"


class SafetensorsCheckpoint:
    """Name -> shard map of a folder's safetensors (via model.safetensors.index.json, else every *.safetensors).

    Shards are opened with safetensors `safe_open` (mmap) on first use; tensors are read one at a time.
    Raises MissingFileError naming the index or shard path when a file is absent or unreadable.
    """

    def __init__(self, folder: str):
        self.folder = folder
        self._handles = {}
        # block-scaled FP8's weight_block_size from quantization_config (set by the loader), None = from the grid
        self.fp8_block = None
        index_path = os.path.join(folder, INDEX_FILE)
        if os.path.isfile(index_path):
            self.weight_map = self._read_index(index_path)
        else:
            self.weight_map = self._scan_shards()
        for shard in sorted(set(self.weight_map.values())):
            if not os.path.isfile(os.path.join(folder, shard)):
                raise MissingFileError(os.path.join(folder, shard), f"shard listed in {INDEX_FILE} is missing")

    @staticmethod
    def _read_index(path: str) -> dict:
        try:
            with open(path, encoding="utf-8") as f:
                return dict(json.load(f)["weight_map"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise MissingFileError(path, f"unreadable index ({exc})") from exc

    def _scan_shards(self) -> dict:
        shards = sorted(n for n in os.listdir(self.folder) if n.endswith(".safetensors"))
        if not shards:
            raise MissingFileError(os.path.join(self.folder, "model.safetensors"), "no *.safetensors weights in folder")
        weight_map = {}
        for shard in shards:
            for name in self._open(shard).keys():
                weight_map[name] = shard
        return weight_map

    def _open(self, shard: str):
        if shard not in self._handles:
            path = os.path.join(self.folder, shard)
            try:
                self._handles[shard] = safe_open(path, framework="pt", device="cpu")
            except Exception as exc:
                check_not_lfs_pointer(path)
                raise MissingFileError(path, f"not a readable safetensors file ({exc})") from exc
        return self._handles[shard]

    def __contains__(self, name: str) -> bool:
        return name in self.weight_map

    def file_of(self, name: str) -> str:
        """Path of the shard holding `name`."""
        return os.path.join(self.folder, self.weight_map[name])

    def shape(self, name: str) -> tuple:
        """Shape from the shard header, without reading data. Raises MissingTensorError."""
        return tuple(self._slice(name).get_shape())

    def dtype(self, name: str) -> str:
        """The safetensors header dtype ("BF16", "F8_E4M3", "U8", ...), without reading data. Raises
        MissingTensorError."""
        return self._slice(name).get_dtype()

    def _slice(self, name: str):
        if name not in self.weight_map:
            raise MissingTensorError(name, self.folder)
        handle = self._open(self.weight_map[name])
        if name not in handle.keys():
            raise MissingTensorError(name, self.file_of(name))
        return handle.get_slice(name)

    def get(self, name: str) -> torch.Tensor:
        """The tensor in its on-disk dtype (e.g. bf16 weights, fp32 A_log). Raises MissingTensorError."""
        self._slice(name)
        return self._handles[self.weight_map[name]].get_tensor(name)
