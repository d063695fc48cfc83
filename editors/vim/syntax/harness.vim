" Vim and Neovim syntax for .harness specs (harnessc). The keyword lists are the lexer's
" (tests/test_editors.py compares them); a keyword is highlighted wherever it is spelt alone,
" while a dotted path (`actor.role`) or a selector (`mcp:scanner:*`) is one word, as in the
" TextMate grammar.
if exists("b:current_syntax")
  finish
endif

syntax iskeyword @,48-57,_,.,:
syntax case match

syntax keyword harnessDeclaration harness import connection runtime fact label tool extend surface policy risk_table mcp
syntax keyword harnessDeclaration skill agent workflow test step subagent operation private
syntax keyword harnessEffect allow deny ask
syntax keyword harnessOperator and or not in has matches startswith endswith within from only all any of
syntax keyword harnessBoolean true false
syntax keyword harnessKeyword actor add after ago approver as backoff by call class compensate compensation
syntax keyword harnessKeyword context decide default delegate description dynamic each earlier effects enum env
syntax keyword harnessKeyword escalate execution expect expires expose facts gate grant hide include input instead
syntax keyword harnessKeyword labels legacy limit list map max min not_for on_failure on_success once options
syntax keyword harnessKeyword output packs pattern persona prefer primitive profile provided_by rank reason
syntax keyword harnessKeyword recall remove replaced_by requires rerank resource retry returns risk role rule said
syntax keyword harnessKeyword secret self_approval skills summary tags task then timeout to tools top
syntax keyword harnessKeyword transport trust trusted ttl untrusted use_when user version when wire_name

" a key before `:` (a rule label, a field, a record entry) outranks a keyword, as in the lexer
syntax match harnessKey /\<[A-Za-z_][A-Za-z0-9_.]*\ze\s*:\(:\)\@!/
syntax match harnessSelector /\<mcp:[A-Za-z0-9_.\/*:-]\+/
syntax match harnessSelector /\<\(pack\|kind\):[A-Za-z_][A-Za-z0-9_-]*/
syntax match harnessSelector /\([A-Za-z_][A-Za-z0-9_]*\.\)*\*[A-Za-z0-9_.*]*/
syntax match harnessDuration /\<[0-9]\+\(ms\|[smhd]\)\([0-9]\+\(ms\|[smhd]\)\)*\>/
syntax match harnessNumber /-\=\<[0-9]\+\(\.[0-9]\+\([eE][-+]\=[0-9]\+\)\=\)\=\>/
syntax match harnessOperator /==\|!=\|<=\|>=\|[<>?=]/
syntax region harnessString start=/"/ skip=/\\./ end=/"\|$/ contains=harnessEscape oneline
syntax match harnessEscape /\\./ contained
syntax match harnessComment /#.*$/ contains=@Spell

highlight default link harnessDeclaration Structure
highlight default link harnessEffect Statement
highlight default link harnessOperator Operator
highlight default link harnessBoolean Boolean
highlight default link harnessKeyword Keyword
highlight default link harnessKey Identifier
highlight default link harnessSelector Function
highlight default link harnessDuration Number
highlight default link harnessNumber Number
highlight default link harnessString String
highlight default link harnessEscape SpecialChar
highlight default link harnessComment Comment

let b:current_syntax = "harness"
