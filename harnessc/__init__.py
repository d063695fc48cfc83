"""harnessc: a declarative language and compiler for governing what AI agents may do."""

__version__ = "0.1.0"
