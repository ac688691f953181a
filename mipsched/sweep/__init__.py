"""`mipsched sweep`: grids of solves over networks, batches and hardware numbers, run
locally or on Ray, resumably."""
