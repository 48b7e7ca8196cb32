"""Plots of a stored run as inline SVG, registered in PLOTS, and the SVG checks."""
