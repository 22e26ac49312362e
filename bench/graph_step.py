"""graph_step.py - the hand-written torch.cuda.graph the PyTorch benchmarks
compare kplan.torch with, written as PyTorch's CUDA graph documentation does:
three warm-up calls on a side stream, a capture, then per step the inputs
copied into the static inputs and one replay."""


def kplan_path(fn, example):
    """The path kplan.torch's capture of fn(*example) takes where libraries
    branch on capture (kplan.torch.GRAPH_PATH_LIBS) under this process's
    KPLAN_TORCH_LIB_PATH: "eager" (the library's eager path), or "libs"
    (its graph's path, as under a plain torch.cuda.graph) with "graph" or
    when an eager call synchronised where a library asked (kplan's watch
    would see the sync). Runs fn once, eagerly, for "eager"."""
    import kplan.torch as kt
    if kt._lib_path_setting(None) == "graph":
        return "libs"
    return "libs" if kt._eager_path_call(fn, example, {})[1] == "graph" else "eager"


def hand_written_graph(fn, example, path=None):
    """(step(*xs) -> static outputs, the graph): fn captured on copies of
    the tensors in `example` (a tuple). The graph reads those copies: keep
    step alive as long as the graph replays. path: None, the capture as
    torch.cuda.graph makes it; "kplan", as kplan.torch's makes it (the
    libraries' eager path where kplan_path says so)."""
    import torch
    if path == "kplan":
        import kplan.torch as kt
        mode = kplan_path(fn, tuple(example))
        body = lambda *xs: kt._call_on_path(mode, fn, xs, {})  # noqa: E731
        step, g = hand_written_graph(body, example)
        step.path = "eager" if mode == "eager" else "graph"
        return step, g
    static_in = [t.clone() for t in example]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(*static_in)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = fn(*static_in)

    def step(*xs):
        for d, x in zip(static_in, xs):
            d.copy_(x)
        g.replay()
        return static_out
    step.graph = g
    return step, g
