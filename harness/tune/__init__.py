"""`napilab tune`'s search: the space as Optuna distributions (space.py), the study on
disk with its candidates (study.py). The loop that runs them is harness/cli/tune_search.py."""
