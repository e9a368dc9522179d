"""A lab (docs/labs/) run as its notebook runs, for the tests of the labs."""

from pathlib import Path


class LabRun:
    """A lab's code cells run in one namespace, as its notebook runs them: the settings cell,
    then the rest, each figure closed once drawn. `run(**settings)` runs the rest again
    with new settings."""

    def __init__(self, lab: Path):
        import jupytext

        cells = [c.source for c in jupytext.read(lab).cells if c.cell_type == "code"]
        settings, *self.rest = cells
        self.namespace: dict = {}
        exec(settings, self.namespace)
        self.run()

    def run(self, **settings) -> dict:
        import matplotlib.pyplot as plt

        self.namespace |= settings
        for cell in self.rest:
            exec(cell, self.namespace)
            plt.close("all")
        return self.namespace
