"""GET /props carries every key llama-server's states (tools/server/server-context.cpp get_res_props): media_marker
(the text a multimodal /completion prompt marks each image or audio clip with, get_media_marker()), model_ftype and
modalities.video beside vision and audio. Clients read media_marker unconditionally (props["media_marker"], then check
modalities: a benchmark script, a Ruby client, a Go CLI), so on this server they stopped on a KeyError where
llama-server answers; here the model takes no media, so modalities says none and the marker is llama.cpp's default."""


async def test_props_has_media_marker_ftype_and_video(stack):
    client, _ = stack
    response = await client.get("/props")
    body = await response.json()
    assert response.status == 200
    assert body["media_marker"] == "<__media__>"
    assert body["modalities"] == {"vision": False, "video": False, "audio": False}
    assert isinstance(body["model_ftype"], str) and body["model_ftype"]
