"""Gateway and scheduler processes: the names SPARKINFER_SERVED_MODEL_NAME gives the served model."""
import re


def served_names(value) -> list:
    """The names in SPARKINFER_SERVED_MODEL_NAME (--served-model-name), separated by commas or blanks, as vLLM's
    --served-model-name takes several (nargs="+", vllm/entrypoints/openai/cli_args.py: "the server will respond to
    any of the provided names. The model name in the model field of a response will be the first name"): the first
    names the model in answers and metrics, each is accepted as a request's model and listed by /v1/models."""
    return [name for name in re.split(r"[,\s]+", value or "") if name]
