"""A run over several replicas (harness.cli.fleet): the pooled A/B table and its reports."""
