"""`harnessc serve`: the runtime over HTTP/JSON for agents in any language (docs/serve.md).

The top layer of the runtime: it imports the runtime's packages below it and nothing of the
compiler, so a server over a built spec (`model.json`) runs without the compiler installed;
`harnessc serve` (compiler/serve_cli.py) composes it with a spec compiled on the spot and the
operations console. Starlette and uvicorn are the `serve` extra.

- app.py: the application (`build_app`), its endpoints and errors
- models.py: the wire models; openapi.py: the OpenAPI document made from them
- tokens.py: the bearer tokens (stored hashed, revocable)
- authzen.py: the AuthZEN 1.0 evaluation API
- decisions.py: decision logs in OPA's shape, from the event log
"""
