"""The .harness language front end: grammar, parser, syntax tree, formatter, diagnostics."""
