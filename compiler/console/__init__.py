"""The operations console (`harnessc console`, the `console` extra): a web page on the event
store where operators approve and deny pending calls, see grants, sessions and their timelines,
and decide workflow gates. Every button is a runtime command (`runtime.operations`,
`Workflows.decide`); the console keeps no state of its own beyond the signed login cookie."""
