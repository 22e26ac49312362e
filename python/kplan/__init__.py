"""kplan: apply a kplan plan file to a PyTorch program.

    import kplan.torch as kt
    kt.open("model.kplan")               # or no call: KPLAN_PLAN from the environment

    @kt.region("step")
    def step(x):
        return model(x)

`import kplan` and `import kplan.torch` do not import torch; it is imported
on the first region call. See python/README.md.
"""
__version__ = "0.1.0"
__all__ = ["__version__"]
