"""The search: legal candidates, the exact branch and bound with its bounds, the CP-SAT stage
partition, and the exhaustive oracle the tests check it against."""
