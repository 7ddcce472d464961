"""Unit constants: the one place where human units (GiB, GB/s, TFLOP/s, us) become SI floats."""

GB = 1e9  # decimal gigabyte: network and HBM bandwidths are quoted in 1e9 bytes/s
GIB = 2.0**30  # binary gibibyte: memory capacities are quoted in GiB
MIB = 2.0**20
TFLOPS = 1e12
US = 1e-6  # microsecond in seconds
GBIT = 1e9 / 8  # one gigabit in bytes: NIC speeds are quoted in Gb/s


def gbit_to_gb_per_s(gbit_per_s: float) -> float:
    """NIC line rate in Gb/s to GB/s (400 Gb/s NDR -> 50 GB/s)."""
    return gbit_per_s / 8.0
