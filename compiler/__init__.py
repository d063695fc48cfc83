"""The harnessc compiler: resolve, check, analyse, emit, and the command line."""
