"""The ``harnessc`` command line."""


def main(argv=None):
    return 0
