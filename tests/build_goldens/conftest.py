"""The golden copy of a build holds a generated test suite: it is compared, never collected."""

collect_ignore_glob = ["*"]
