"""Which files named on a command line are roots of their own build.

Each named file is the root of a build (it and what it imports), unless another named file's
build loads it: then it is checked as part of that build, once. Files whose builds load each
other (an import cycle, itself an error) make one build, rooted at the first one named.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from harnessc.dsl.files import confined, display_path, named_once

from .modules import LoadFile, load_modules


def file_roots(paths: Sequence[str | Path], load_file: LoadFile) -> list[str | Path]:
    """The named files that root a build, in command-line order, each file once.

    Reads and parses every named file and what it imports to learn which named files each one
    loads (`load_file` should read each file once: the builds then reuse what it read, see
    `pipeline.loading_once`); nothing is resolved and no diagnostic is kept: the builds
    report them.
    """
    named = {os.path.realpath(path): path for path in named_once(paths)}
    if len(named) < 2:
        return list(named.values())
    reaches: dict[str, set[str]] = {}
    for key, path in named.items():
        if confined(path) is not None:  # a link out of the project: its build reports it
            reaches[key] = set()
            continue
        graph = load_modules([load_file(Path(path), display_path(path))], load_file)
        reaches[key] = {m.key for m in graph.modules if m.key in named and m.key != key}
    position = {key: index for index, key in enumerate(named)}
    loaders: dict[str, list[str]] = {key: [] for key in named}
    for other, reached in reaches.items():
        for key in reached:
            loaders[key].append(other)
    # kept unless a file that loads it is not loaded by it back, or is, and was named first;
    # INVARIANT: reach is transitive, so each dropped file is loaded by some kept one
    return [
        path
        for key, path in named.items()
        if not any(
            other not in reaches[key] or position[other] < position[key] for other in loaders[key]
        )
    ]
