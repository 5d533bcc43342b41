"""The OpenAPI document the server publishes is the oracle of the remote client: every route
the client calls exists there with the method it uses, and every field the client sends in
a submission or a resume is a property of the documented request body."""

import json
import urllib.request

from trellis_client.routes import API_PREFIX, ROUTES
from trellis_client.submission import Submission


def fetch_document(server):
    with urllib.request.urlopen(server.url + "/openapi.json", timeout=30) as answer:
        return json.loads(answer.read())


def request_properties(document, path, method):
    content = document["paths"][path][method]["requestBody"]["content"]["application/json"]
    return set(resolve(document, content["schema"])["properties"])


def resolve(document, schema):
    """The object schema behind a reference, or behind the one reference of an optional body
    (`oneOf: [null, $ref]`)."""
    if "$ref" in schema:
        return document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    for key in ("oneOf", "anyOf"):
        for option in schema.get(key, []):
            if "$ref" in option:
                return resolve(document, option)
    return schema


def test_every_route_the_client_calls_is_documented(server):
    document = fetch_document(server)
    paths = document["paths"]
    for name, (method, template) in ROUTES.items():
        path = API_PREFIX + template
        assert path in paths, "%s: %s is not in /openapi.json" % (name, path)
        assert method.lower() in paths[path], "%s: %s %s is not documented" % (name, method, path)


def test_submission_fields_are_documented(server):
    document = fetch_document(server)
    accepted = request_properties(document, API_PREFIX + "/runs", "post")
    full = Submission(template="software-change", task="t", plan={"nodes": {}},
                      workspace="w", title="t", submission_key="k", delivery="none",
                      no_preflight=True).request_body()
    graph = Submission(graph={"kind": "x"}, input={"a": 1}, uniform={"kind": "command"}).request_body()
    assert set(full) | set(graph) <= accepted, (set(full) | set(graph)) - accepted
    resume = request_properties(document, API_PREFIX + "/runs/{run}/resume", "post")
    assert {"fromCheckpoint", "force"} <= resume
