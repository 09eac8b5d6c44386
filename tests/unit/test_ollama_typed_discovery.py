"""Ollama's discovery answers as ollama-python's typed responses read them (ollama/_types.py ListResponse,
ProcessResponse, ShowResponse: pydantic models its client builds from /api/tags, /api/ps and /api/show) and as the
Go structs write them (api/types.go ListModelResponse, ProcessModelResponse, ShowResponse, ModelDetails): every field
the client types parses (dates with their zone, sizes as ints), and the values clients act on are there: the
capabilities Copilot and Zed gate tools and thinking on, <arch>.context_length that LlamaIndex reads from model_info,
num_ctx that Continue reads from parameters, and a version Open WebUI parses into integers."""
import re
from datetime import datetime, timezone

import ollama


async def test_tags_ps_show_and_version_validate_as_ollama_pythons_types(stack):
    client, _ = stack
    assert (await client.post("/api/generate", json={"model": "fake-model"})).status == 200   # loads it: /api/ps
    tags = ollama.ListResponse.model_validate_json(await (await client.get("/api/tags")).read())
    ps = ollama.ProcessResponse.model_validate_json(await (await client.get("/api/ps")).read())
    show = ollama.ShowResponse.model_validate_json(
        await (await client.post("/api/show", json={"model": "fake-model"})).read())
    version = (await (await client.get("/api/version")).json())["version"]
    [listed], [loaded] = tags.models, ps.models
    assert listed.model == loaded.model == "fake-model:latest"
    assert isinstance(listed.modified_at, datetime) and listed.modified_at.tzinfo is not None
    assert loaded.expires_at > datetime.now(timezone.utc) and isinstance(loaded.size_vram, int)
    assert listed.size == loaded.size > 0 and listed.digest == loaded.digest and len(listed.digest) == 64
    for details in (listed.details, loaded.details, show.details):
        assert details.format and details.family and details.parameter_size and details.quantization_level
    assert "completion" in show.capabilities
    architecture = show.modelinfo["general.architecture"]
    context = show.modelinfo[f"{architecture}.context_length"]
    assert isinstance(context, int) and context == loaded.model_dump()["context_length"]
    assert re.search(rf"^num_ctx\s+{context}$", show.parameters, re.M)
    assert tuple(map(int, re.sub(r"^v|-.*", "", version).split("."))) >= (0, 6, 4)
