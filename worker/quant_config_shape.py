"""Worker and scheduler processes: the JSON types of config.json's quantization_config, checked before the loader
reads it (torch-free), so that a malformed one is refused in one line naming the field, as every other refusal is."""
from worker.checkpoint_errors import UnsupportedModelError

# quantization_config fields the loader reads (kernels/nvfp4/checkpoint.py read_quant_config) that list module names:
# the Linears a recipe left unquantized (compressed-tensors / ModelOpt `ignore`, ModelOpt's older `exclude_modules`)
_NAME_LISTS = ("ignore", "exclude_modules")


def _block(value) -> bool:
    """A block of block-scaled FP8: [rows, cols], positive integers (Qwen's -FP8 weight_block_size [128, 128])."""
    return (isinstance(value, list) and len(value) == 2
            and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in value))


def _problem(quant: dict):
    """(field, what it must be, its value) of the first field of quantization_config the loader cannot read, or None."""
    for key in _NAME_LISTS:
        names = quant.get(key)
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            return key, "a list of module names", names
    if quant.get("weight_block_size") is not None and not _block(quant["weight_block_size"]):
        return "weight_block_size", "two positive integers [rows, cols]", quant["weight_block_size"]
    groups = quant.get("config_groups")
    if groups is not None and not (isinstance(groups, dict) and all(isinstance(g, dict) for g in groups.values())):
        return "config_groups", "an object of group objects", groups
    for name, group in (groups or {}).items():
        weights = group.get("weights")
        if weights is not None and not isinstance(weights, dict):
            return f"config_groups.{name}.weights", "an object", weights
        block = (weights or {}).get("block_structure")
        if block is not None and not _block(block):
            return f"config_groups.{name}.weights.block_structure", "two positive integers [rows, cols]", block
    layers = quant.get("quantized_layers")
    if layers is not None and not (isinstance(layers, dict) and all(isinstance(v, dict) for v in layers.values())):
        return "quantized_layers", "an object of per-module objects", layers
    return None


def check_quantization_config(quant, source: str, block: str = "quantization_config") -> None:
    """UnsupportedModelError naming the field of quantization_config (absent or null: not quantized) whose JSON type
    the loader cannot read. Read as it was, `"quantization_config": "fp8"` failed with AttributeError ('str' object
    has no attribute 'get'), a weight_block_size of "x" with int()'s ValueError and an `ignore` of 5 with TypeError,
    each a traceback in place of `make run`'s one-line refusal; an `ignore` of "lm_head" was read as its letters.
    `block` names the object in messages: "quantization" for ModelOpt's legacy hf_quant_config.json."""
    if quant is None:
        return
    if not isinstance(quant, dict):
        raise UnsupportedModelError(source, f"{block} must be an object, got {quant!r}")
    problem = _problem(quant)
    if problem is not None:
        key, expected, value = problem
        raise UnsupportedModelError(source, f"{block}.{key} must be {expected}, got {value!r}")
