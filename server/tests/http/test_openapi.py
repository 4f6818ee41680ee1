"""The OpenAPI document served at /v1/openapi.json against the real routes:
every documented path and method answers something other than 404/405 on
the running server, every other method on those paths is 405, and every API
route of the router (server/src/http/mod.rs) is documented."""

from __future__ import annotations

import re
from typing import Any, Dict, Set, Tuple

from conftest import REPO, HttpServer, request

METHODS = {"get", "post", "delete", "put", "patch"}
#: The dashboard's own pages, not part of the API.
NOT_API = {"/", "/signin", "/signout", "/assets/{name}"}


def router_routes() -> Set[Tuple[str, str]]:
    """(path, method) of every `.route("...", get(..).post(..))` in the router."""
    source = (REPO / "server" / "src" / "http" / "mod.rs").read_text()
    routes = set()
    for path, handlers in re.findall(r'\.route\("([^"]+)",\s*([^\n]+)\)\n', source):
        for method in re.findall(r"\b(get|post|delete|put|patch)\(", handlers):
            routes.add((path, method))
    assert routes, "no routes found in server/src/http/mod.rs"
    return routes


def documented(doc: Dict[str, Any]) -> Set[Tuple[str, str]]:
    return {(path, m) for path, item in doc["paths"].items() for m in item if m in METHODS}


def concrete(path: str) -> str:
    return path.replace("{topic}", "openapi-topic").replace("{id}", "openapi-id")


def test_the_document_is_served_without_a_token(server: HttpServer) -> None:
    status, doc, headers = request(server.base, "GET", "/v1/openapi.json", token=None)
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert doc["openapi"].startswith("3.") and doc["paths"]


def test_every_route_is_documented_and_nothing_else(server: HttpServer) -> None:
    doc = request(server.base, "GET", "/v1/openapi.json", token=None)[1]
    api = {(p, m) for p, m in router_routes() if p not in NOT_API}
    assert documented(doc) == api, (
        f"undocumented: {sorted(api - documented(doc))}; documented, no route: {sorted(documented(doc) - api)}"
    )


def test_documented_operations_answer_and_other_methods_do_not(server: HttpServer) -> None:
    doc = request(server.base, "GET", "/v1/openapi.json", token=None)[1]
    for path, item in doc["paths"].items():
        url = concrete(path)
        for method in METHODS:
            # An empty JSON object: a validation error (400) still proves
            # the route and method exist.
            body = {} if method in ("post", "put", "patch") else None
            status, data, _ = request(server.base, method.upper(), url, body)
            if method in item:
                assert status not in (404, 405), f"{method.upper()} {url}: {status} {data}"
            else:
                assert status == 405, f"{method.upper()} {url} is not documented but answered {status}"
