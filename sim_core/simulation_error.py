"""The error a run raises when the engine breaks its own invariants, apart from the runner: the faces catch it
without loading the engine."""


class SimulationError(RuntimeError):
    """The engine ended with requests neither finished nor rejected: a bug, never a valid outcome."""
