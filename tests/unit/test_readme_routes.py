"""README's Routes table against the gateway's router: every route it names (`GET /v1/models`, `POST /props`,
`DELETE /v1/requests/{id}`, and a first cell's bare aliases such as `/tokenize`) is one the app registers for that
method, so a route renamed or dropped in the code cannot stay documented (it would answer 'no route' 404).

test_readme_config.py and test_readme_commands.py check README's variables, paths and commands; nothing read its
routes, each checked by hand with a request per route (session 23).
"""
import re
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.app import create_app
from gateway.config import GatewayConfig

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
METHODS = ("GET", "POST", "DELETE", "HEAD", "PUT")
# `/v1` in "(as llama.cpp's server takes it without `/v1`)" is a prefix, not a route.
PREFIXES = {"/v1"}


def documented_routes() -> list[tuple[tuple[str, ...], str]]:
    """(methods, path) per route the table names: `METHOD /path`, `GET`/`DELETE /path` (methods shared), and a first
    cell's bare `/path` (any method); a wildcard (`/api/*`) names a family, not a route."""
    table = README[README.index("## Routes"):README.index("Behaviour worth knowing")]
    routes = []
    for row in table.splitlines():
        if not row.startswith("| `"):
            continue
        for number, cell in enumerate(row.strip("|").split(" | ")[:2]):
            pending = []
            for span in re.findall(r"`([^`]+)`", cell):
                if span in METHODS:
                    pending.append(span)
                    continue
                match = re.fullmatch(rf"(?:({'|'.join(METHODS)}) )?(/[\w./{{}}:-]*)", span)
                if match and (match.group(1) or number == 0) and span not in PREFIXES:
                    methods = (*pending, match.group(1)) if match.group(1) else ()
                    routes.append((methods, match.group(2)))
                pending = []
    return routes


ROUTES = documented_routes()


def _concrete(path: str) -> str:
    """A path the route's pattern matches: `{id}` and `:digest` placeholders filled in."""
    return re.sub(r"\{[^}]+\}|:\w+", "x1", path)


async def _served(app: web.Application, method: str, path: str) -> bool:
    """Whether the router has a route for it (else its match is a 404 or 405, which the error middleware answers)."""
    match_info = await app.router.resolve(make_mocked_request(method, _concrete(path), app=app))
    return match_info.http_exception is None


@pytest.fixture(scope="module")
def app():
    return create_app(GatewayConfig(), client=None)


def test_the_table_names_the_routes_clients_call_first():
    """The parse reads the table: a guard against a README layout change that would leave the check below empty."""
    named = {(methods, path) for methods, path in ROUTES}
    for route in [(("GET",), "/v1/models"), (("POST",), "/v1/chat/completions"), (("GET", "DELETE"),
                  "/v1/responses/{id}"), ((), "/tokenize"), (("POST",), "/props")]:
        assert route in named
    assert len(ROUTES) > 60


@pytest.mark.parametrize("methods, path", ROUTES, ids=[f"{'/'.join(m) or 'ANY'} {p}" for m, p in ROUTES])
async def test_every_route_readme_names_is_served(app, methods, path):
    if methods:
        assert [method for method in methods if not await _served(app, method, path)] == []
    else:
        assert await _served(app, "GET", path) or await _served(app, "POST", path)
