"""Gateway process: Ollama model names, read as Ollama's model reference parse reads them and matched to the served
model as Ollama's getExistingName finds them."""
from __future__ import annotations

from typing import Callable, Optional

from gateway.errors import ApiError, Forbidden, InvalidRequest, NotFound
from gateway.model import ModelCard

# Ollama's words for a name its model.ParseName cannot take (types/errtypes InvalidModelNameErrMsg).
INVALID_NAME = "invalid model name"
# What cutPromised puts where a separator promised a part and none follows: never a valid part.
_MISSING = "!MISSING!"
_HOST, _NAMESPACE, _MODEL, _TAG = range(4)
# Ollama's 403 for a cloud model while its cloud is off (internal/cloud DisabledError, server/routes.go cloudErr*):
# no cloud model is served here, as /api/status says; the generation and embedding routes, and /api/show.
REMOTE_MODEL = "ollama cloud is disabled: remote model is unavailable"
REMOTE_DETAILS = "ollama cloud is disabled: remote model details are unavailable"


def tag_name(served_name: str) -> str:
    """The served name as Ollama lists it: with its tag, ":latest" when it has none."""
    return served_name if ":" in served_name.rsplit("/", 1)[-1] else f"{served_name}:latest"


def model_names(card: ModelCard, served_name: str) -> set:
    """The names this server answers to: the served name and its aliases (SPARKINFER_SERVED_MODEL_NAME's names after
    the first, which /v1 takes too), the checkpoint's model id and "default"."""
    return {served_name, *card.served_aliases, card.model_id, "default"}


def reference(raw: str) -> str:
    """The model a request names, as Ollama's modelref.ParseRef reads it: the whitespace around it trimmed and an
    explicit ":local" source suffix dropped ("tiny:local" is "tiny"); "" when it names none."""
    name = raw.strip()
    base, colon, suffix = name.rpartition(":")
    return base if colon and suffix.strip().lower() == "local" else name


def is_cloud(raw: str) -> bool:
    """Whether raw names an Ollama cloud model, as modelref.parseSourceSuffix reads its last ":" suffix: "cloud", or
    a tag ending "-cloud" ("gpt-oss:120b-cloud", "x:cloud", "x:20b:cloud")."""
    _, colon, suffix = raw.strip().rpartition(":")
    word = suffix.strip().lower()
    return bool(colon) and (word == "cloud" or ("/" not in word and word.endswith("-cloud")))


def _cut(text: str, sep: str) -> tuple[str, str, bool]:
    """Go's cutPromised: text cut at its last sep; an empty side is _MISSING."""
    index = text.rfind(sep)
    if index < 0:
        return text, "", False
    return text[:index] or _MISSING, text[index + len(sep):] or _MISSING, True


def _valid_part(kind: int, part: str) -> bool:
    """Ollama's isValidPart: 1-80 characters (a host 350), a letter, digit or '_' first, then those and '_', '-',
    '.' (not in a namespace) and ':' (in a host only)."""
    if not 1 <= len(part) <= (350 if kind == _HOST else 80):
        return False
    for index, char in enumerate(part):
        if char.isascii() and (char.isalnum() or char == "_"):
            continue
        if index == 0 or char not in "-.:" or (char == "." and kind == _NAMESPACE) or (char == ":" and kind != _HOST):
            return False
    return True


def _parts(name: str) -> tuple[str, str, str, str]:
    """Ollama's model.ParseName: [scheme://][host/][namespace/]model[:tag], the parts left out defaulted to
    registry.ollama.ai/library/...:latest."""
    host, namespace, tag = "registry.ollama.ai", "library", "latest"
    if name.rfind(":") > name.rfind("/"):
        name, tag, _ = _cut(name, ":")
    rest, model, cut = _cut(name, "/")
    if not cut:
        model = name
    else:
        rest, part, cut = _cut(rest, "/")
        namespace = part if cut else rest
        if cut:
            scheme, sep, after = rest.partition("://")
            host = (after if sep else scheme) or host
    return host, namespace, model, tag


def valid_name(name: str) -> bool:
    """Whether Ollama's model.ParseName takes name: "tiny:", "a b" or "h/n/m/x" are not names."""
    return all(_valid_part(kind, part) for kind, part in zip((_HOST, _NAMESPACE, _MODEL, _TAG), _parts(name)))


def full_name(served_name: str) -> str:
    """The served name as Ollama's Model.Name gives it (model.Name.String(): host/namespace/model:tag), the name its
    capability errors open with ("registry.ollama.ai/library/tiny:latest does not support tools")."""
    host, namespace, model, tag = _parts(served_name)
    return f"{host}/{namespace}/{model}:{tag}"


def _canonical(name: str) -> str:
    """An Ollama model name as Ollama compares it: case-insensitive, ":latest" when no tag is given, and the default
    registry host and "library" namespace optional ("registry.ollama.ai/library/x:latest" is "x:latest")."""
    name = name.lower()
    for prefix in ("registry.ollama.ai/", "library/"):
        name = name.removeprefix(prefix)
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def serves(name: str, card: ModelCard, served_name: str) -> bool:
    """Whether name is the served model as Ollama would find it (any case, ":latest" and the library namespace
    optional, the whitespace around it and a ":local" suffix ignored)."""
    return _canonical(reference(name)) in {_canonical(known) for known in model_names(card, served_name)}


def model_required(raw: str) -> ApiError:
    """Ollama's 400 for a request without a model: "model is required" (`raw` is the name given, empty)."""
    return InvalidRequest("model is required", param="model")


def model_not_found(raw: str) -> ApiError:
    """/api/generate's (and /api/embed's) answer to a body naming no model: its 404 fallback with the name as sent."""
    return NotFound(f"model '{raw}' not found", param="model")


def resolve_model(body: dict, card: ModelCard, served_name: str, key: str = "model",
                  missing: Optional[Callable[[str], ApiError]] = None, cloud_off: str = REMOTE_MODEL) -> str:
    """The requested model name, as sent (responses echo it). A name that reads as none is the route's `missing`
    error (/api/chat and /api/show: 400 "model is required"); a cloud model Ollama's 403 `cloud_off`, which its
    handlers answer before they look a model up; one that is no Ollama name, Ollama's 400 "invalid model name"; any
    other the served model does not answer to, Ollama's 404 ("model 'x' not found")."""
    name = body.get(key)
    if not name and key == "model":
        name = body.get("name")
    raw = name if isinstance(name, str) else ""
    if not reference(raw):
        raise (missing or model_required)(raw)
    if is_cloud(raw):
        raise Forbidden(cloud_off, param=key)
    if serves(raw, card, served_name):
        return raw
    if not valid_name(reference(raw)):
        raise InvalidRequest(INVALID_NAME, param=key)
    raise NotFound(f"model '{raw}' not found", param=key)
