"""`napilab bisect`: from two kernels, the commit (or image) that changed a metric."""
