"""The harnessc cache folder: `$XDG_CACHE_HOME/harnessc`, else `~/.cache/harnessc`.

What is kept there (the parser's tables, the policy analysis's results) is safe to delete: each
entry is keyed by everything that determines it and is rebuilt when missing. A folder that cannot
be made only costs the rebuilding.
"""

from __future__ import annotations

import os

__all__ = ["cache_folder"]


def cache_folder(*parts: str) -> str | None:
    """The harnessc cache folder (or the folder `parts` below it), made if missing; None when it
    cannot be made."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(root, "harnessc", *parts)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return folder
