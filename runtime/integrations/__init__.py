"""What connects the runtime to the world around it; each is optional.

- telemetry: OpenTelemetry spans for the path of a call (the `otel` extra)
- mcp_client: a live MCP connection on the official SDK (the `mcp` extra)
- adapters: exposed tools as OpenAI and Anthropic function-calling definitions
- exports: tools as MCP `tools/list` entries and OpenAI strict-mode parameters
"""
