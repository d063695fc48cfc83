"""Standard library modules (``std.*``) shipped with harnessc as ``.harness`` files."""
