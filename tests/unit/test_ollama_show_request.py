"""Ollama /api/show with a ShowRequest's system and options, as Ollama's GetModelInfo answers it (server/routes.go):
the system prompt in `system` and as the Modelfile's SYSTEM line, the options merged into the Modelfile's PARAMETER
lines and not into `parameters`; the Ollama CLI sends what `/set system` and `/set parameter` gave with `/show`."""
import orjson


async def test_system_and_options_are_shown_as_ollama_shows_them(stack):
    client, _ = stack
    plain = orjson.loads(await (await client.post("/api/show", json={"model": "fake-model"})).read())
    response = await client.post("/api/show", json={"model": "fake-model", "system": "You are a pirate.",
                                                    "options": {"temperature": 0.5, "stop": ["a b", "END"],
                                                                "num_predict": 1.0, "use_mlock": True}})
    shown = orjson.loads(await response.read())
    assert response.status == 200 and shown["system"] == "You are a pirate."
    lines = shown["modelfile"].splitlines()
    assert lines[1:3] == ["FROM fake-model:latest", "SYSTEM You are a pirate."]
    assert {"PARAMETER temperature 0.5", "PARAMETER stop a b", "PARAMETER stop END", "PARAMETER num_predict 1",
            "PARAMETER use_mlock true"} <= set(lines)
    assert not [line for line in lines if line.startswith("PARAMETER temperature ") and line.endswith(" 1")]
    assert shown["parameters"] == plain["parameters"] and "system" not in plain


async def test_a_system_prompt_of_several_lines_is_quoted(stack):
    client, _ = stack
    body = {"model": "fake-model", "system": "Line one.\nLine \"two\"."}
    shown = await (await client.post("/api/show", json=body)).json()
    assert 'SYSTEM """Line one.\nLine "two"."""\n' in shown["modelfile"]
