"""`python -m harnessc.compiler`: the `harnessc` command line."""

from .cli import entry

entry()
