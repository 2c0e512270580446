"""LightningModules (what is trained) and the dispatch from a config to one."""
