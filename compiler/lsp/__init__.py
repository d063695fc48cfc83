"""`harnessc lsp`: a language server over stdio (pygls) on the compiler's own pipeline.

`workspace.py` checks open documents (their unsaved text, through the pipeline's loader hook);
`convert.py` turns diagnostics and spans into the protocol's; `navigate.py` answers hover,
definition and references from the resolver's symbols; `complete.py` completion; `outline.py`
document symbols and folding; `actions.py` code actions; `server.py` wires them to pygls.
pygls is the `lsp` extra: nothing here is imported by the other commands.
"""
