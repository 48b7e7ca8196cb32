"""One run's report in each output format (HTML with its sections and templates,
text, Markdown, JSON, JUnit) and the run facts they all show."""
