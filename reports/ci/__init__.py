"""Results for CI systems, one writer per format over one list of cases: JUnit XML,
KTAP (the kernel's test output) and the netdev CI's (NIPA's) result JSON. Which case
passes, fails or is skipped is decided once, where the cases are made (reports.formats.
table_junit for a run's table, reports.nightly.junit for the gate), never by a writer."""
