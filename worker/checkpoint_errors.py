"""Worker and scheduler processes: typed errors for reading a Hugging Face checkpoint folder (torch-free)."""
import os


class CheckpointError(Exception):
    """Base class: the checkpoint folder cannot be served. The message names the file or tensor."""


class MissingFileError(CheckpointError):
    """A required file (config.json, a safetensors shard, tokenizer.json, ...) is absent or unreadable."""

    def __init__(self, path: str, detail: str = "missing"):
        super().__init__(f"checkpoint file {path}: {detail}")
        self.path = path


class UnsupportedModelError(CheckpointError):
    """config.json describes a model_type or variant this engine does not run."""

    def __init__(self, path: str, detail: str):
        super().__init__(f"{path}: unsupported model: {detail}")
        self.path = path


class TensorShapeError(CheckpointError):
    """A tensor's shape on disk differs from the one the config implies."""

    def __init__(self, name: str, expected, found, file: str = ""):
        where = f" in {file}" if file else ""
        super().__init__(
            f"tensor {name}{where} has shape {list(found)}, expected {list(expected)}"
        )
        self.name, self.expected, self.found = name, tuple(expected), tuple(found)


class MissingTensorError(CheckpointError):
    """A tensor the model needs is not in any shard (or the index points to a shard that lacks it)."""

    def __init__(self, name: str, where: str):
        super().__init__(f"tensor {name} missing from {where}")
        self.name = name


# the first line of a Git LFS pointer file (https://github.com/git-lfs/git-lfs/blob/main/docs/spec.md)
LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def check_not_lfs_pointer(path: str) -> None:
    """MissingFileError when `path` holds a Git LFS pointer in place of its content: a Hugging Face repository cloned
    without git-lfs, whose shards then failed as "Error while deserializing header: HeaderTooLarge" (safetensors) and
    whose tokenizer.json as JSON that does not parse (huggingface/transformers#27923, deepseek-ai/DeepSeek-V3#557)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(LFS_POINTER))
    except OSError:
        return
    if head == LFS_POINTER:
        raise MissingFileError(path, "a Git LFS pointer, not the file (cloned without git-lfs: run `git lfs pull` "
                                     "in the folder, or download it with `hf download`)")


def check_folder(path: str) -> None:
    """MissingFileError unless `path` is a folder: "does not exist", or, for a file (a .gguf that llama.cpp and
    Ollama take), that it is one and what is read instead."""
    if os.path.isdir(path):
        return
    if not os.path.isfile(path):
        raise MissingFileError(path, "checkpoint folder does not exist")
    what = "a GGUF file (llama.cpp / Ollama's format)" if path.lower().endswith(".gguf") else "a file"
    raise MissingFileError(path, f"{what}, not a checkpoint folder: give the Hugging Face folder that holds "
                                 "config.json, tokenizer.json and the *.safetensors weights")
