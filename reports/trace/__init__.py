"""The trace collector's stages in reports: the breakdown per comparison."""
