" .harness files are harnessc specs.
autocmd BufRead,BufNewFile *.harness setfiletype harness
