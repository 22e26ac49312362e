"""graph_step.py - the hand-written torch.cuda.graph the PyTorch benchmarks
compare kplan.torch with, written as PyTorch's CUDA graph documentation does:
three warm-up calls on a side stream, a capture, then per step the inputs
copied into the static inputs and one replay."""


def hand_written_graph(fn, example):
    """(step(*xs) -> static outputs, the graph): fn captured on copies of
    the tensors in `example` (a tuple). The graph reads those copies: keep
    step alive as long as the graph replays."""
    import torch
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
