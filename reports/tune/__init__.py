"""`napilab tune`'s reports: what a study's runs say (confirm: a candidate's numbers, the
confirmation's verdicts), its text, Markdown, HTML and JSON report (report) and its
figures (plots)."""
