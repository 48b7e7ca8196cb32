"""Across runs over time: the regression gate (`napilab check`) and its JUnit, the
history of a profile, and the published site with its trends and Atom feed."""
