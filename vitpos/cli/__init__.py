"""The command line, in and out: tool options, Hydra's errors as one line, and the console."""
