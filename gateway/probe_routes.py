"""Gateway routes: the health probes (/health and the paths other servers probe), /version and /metrics."""
from aiohttp import web

from gateway import metrics
# llama-server's llamacpp:* series beside the sparkinfer_ ones (GET /props says endpoint_metrics: true).
import gateway.metrics_llama_cpp  # noqa: F401
from gateway.engine import Engine
from gateway.errors import ApiError, ModelUnloadable
from gateway.web import json_response

# How long /health waits for the scheduler's Load: a probe (compose's healthcheck, k8s' readinessProbe) must allow more.
HEALTH_LOAD_TIMEOUT_S = 2.0
# The 503s of a server still coming up: llama-server answers them {"error": {"code": 503, "message": "Loading model",
# "type": "unavailable_error"}} (server-context.cpp, before the model is loaded), which clients read as "starting,
# retry" rather than a foreign listener's 503 (pensae's ModelCapabilityProbe, load waiters).
_STARTING = ("scheduler_unreachable", "worker_down")


def _unhealthy(reason: str, detail: str) -> web.Response:
    """503 with the reason, and llama-server's error object beside it ("Loading model" while the engine comes up)."""
    error = {"code": 503, "message": "Loading model" if reason in _STARTING else detail, "type": "unavailable_error"}
    return json_response({"status": "unhealthy", "reason": reason, "detail": detail, "error": error}, status=503)


class ProbeRoutes:
    """GET /health (also /v1/health, /ping, /health_generate and POST /ping), GET /version, GET /metrics."""

    def __init__(self, engine: Engine, version: str):
        self.engine = engine
        self.version = version

    def register(self, app: web.Application) -> None:
        """Adds the health probes (/health, /v1/health, /ping, /health_generate), /version and /metrics."""
        app.router.add_get("/health", self.health)
        # llama.cpp's server answers /v1/health as /health (clients whose base URL ends in /v1 probe it there).
        app.router.add_get("/v1/health", self.health)
        # vLLM's SageMaker-style liveness probe: GET and POST /ping answer as /health does.
        app.router.add_get("/ping", self.health)
        app.router.add_post("/ping", self.health)
        # SGLang's probe path (its /health and /health_generate share one handler): Kubernetes probes and routers set
        # up for SGLang ask there.
        app.router.add_get("/health_generate", self.health)
        app.router.add_get("/version", self.version_route)
        app.router.add_get("/metrics", self.metrics_route)

    async def health(self, request: web.Request) -> web.Response:
        """The health probes: 200 {"status": "ok", model, num_running, ...} while a worker serves; 503 with the reason
        (worker_down, scheduler_draining, the scheduler unreachable) and llama-server's error object otherwise."""
        try:
            load = await self.engine.client.load(timeout=HEALTH_LOAD_TIMEOUT_S)
            if not load.worker_alive:
                return _unhealthy("worker_down", "the scheduler has no live worker")
            # A readiness probe must fail while the scheduler drains, or a balancer keeps sending requests it refuses.
            if load.draining:
                return _unhealthy("scheduler_draining", "the scheduler is shutting down: it finishes the requests it "
                                                        "has and takes no new ones")
            # Asked only with a live worker: the scheduler gives the card (with its context) once a worker said hello.
            card = await self.engine.card()
        except ApiError as exc:
            reason = "model_unloadable" if isinstance(exc, ModelUnloadable) else "scheduler_unreachable"
            return _unhealthy(reason, exc.message)
        # the name every API states (SPARKINFER_SERVED_MODEL_NAME when set), as /v1/models lists it
        model = self.engine.served_model_name or card.model_id
        return json_response({"status": "ok", "model": model, "num_running": load.num_running,
                              "num_waiting": load.num_waiting})

    async def version_route(self, request: web.Request) -> web.Response:
        """GET /version: {"name": "sparkinfer", "version"}."""
        return json_response({"name": "sparkinfer", "version": self.version})

    async def metrics_route(self, request: web.Request) -> web.Response:
        """GET /metrics: the gateway's Prometheus text, the scheduler's load gauges mirrored (left out while it does not
        answer within 1 s)."""
        try:
            load = await self.engine.client.load(timeout=1.0)
        except ApiError:
            load = None
        metrics.set_scheduler_load(load)
        # A blank name[] filters nothing, as prometheus_client's handler reads the query (parse_qs drops blank values).
        names = [name for name in request.query.getall("name[]", []) if name]
        body, content_type = metrics.render(request.headers.get("Accept"), self.engine.known_model_name(), names)
        body, encoding = metrics.compressed(body, request.headers.get("Accept-Encoding"))
        return web.Response(body=body, headers={"Content-Type": content_type, **encoding})
