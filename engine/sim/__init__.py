"""The simulated forward pass: the real scheduler, KV pool and metrics, with each step's
time predicted by a roofline model of a named model shape on a named GPU.

``--model sim:llama-3.1-8b@h100`` selects it (``engine.sim.target``); the step-time model
is ``engine.sim.step_cost``, the specs ``engine.sim.specs``, the runner that stands in for
``ModelRunner`` ``engine.sim.runner`` and the virtual-clock driver ``engine.sim.offline``.
Nothing here imports torch but ``engine.sim.calibrate*`` (``tailwatch engine calibrate``),
which profiles the torch engine to fit the step model; ``sim:<model>@file:<path>`` loads
its result (``engine.sim.calibration_file``) without torch.
"""
