"""Worker and scheduler processes: the JSON types of config.json's quantization_config, checked before the loader
reads it (torch-free), so that a malformed one is refused in one line naming the field, as every other refusal is; and
the formats and run-time transforms it names."""
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


def online_transforms_of(quant: dict) -> list:
    """"group.location" of each rotation in compressed-tensors' transform_config (QuIP, SpinQuant) applied to the
    activations at run time: every location but weight_input / weight_output, which are folded into the stored
    weights (compressed_tensors transform_args.py TransformLocation.is_online)."""
    transforms = quant.get("transform_config") if isinstance(quant, dict) else None
    groups = transforms.get("config_groups") if isinstance(transforms, dict) else None
    found = []
    for name, scheme in (groups.items() if isinstance(groups, dict) else ()):
        for args in (scheme.get("apply") or []) if isinstance(scheme, dict) else ():
            location = args.get("location") if isinstance(args, dict) else None
            if location not in ("weight_input", "weight_output"):
                found.append(f"{name}.{location}")
    return found


def sparsity_format_of(raw: dict) -> list:
    """[compressed-tensors' sparsity_config.format] ("sparse-24-bitmask", "sparse-bitmask": 2:4 sparse weights stored
    as values and bitmasks, which the loader refuses with the other formats it does not read), [] when dense / none."""
    sparsity = (raw.get("quantization_config") or {}).get("sparsity_config")
    fmt = sparsity.get("format") if isinstance(sparsity, dict) else None
    return [str(fmt)] if fmt and fmt != "dense" else []


def quant_formats_of(quant: dict) -> list:
    """quantization_config's "format" and each config_groups entry's "format" (compressed-tensors names the format
    per group under "mixed-precision"), in order, without repeats."""
    groups = quant.get("config_groups") if isinstance(quant.get("config_groups"), dict) else {}
    found = [quant.get("format")] + [g.get("format") for g in groups.values() if isinstance(g, dict)]
    return list(dict.fromkeys(str(f) for f in found if f))
