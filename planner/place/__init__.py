"""Where ranks land: the rank map of a layout (ranks.py) and, on a real allocation, its placement."""
