"""Data: CIFAR-10 (official or ImageFolder), generated shapes, toy sequences; in memory, batch-augmented."""
