"""MCP servers the live-client tests start (tests/test_mcp_live.py), written with the SDK."""
