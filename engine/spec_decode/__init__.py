"""Speculative decoding with an n-gram (prompt-lookup) proposer: no draft model.

``config`` (vLLM's ``--speculative-config`` JSON), ``ngram`` (the proposer), ``drafts`` (who
proposes: the torch engine's proposer or the simulator's), ``verify`` (what the verifying
rows see, and which drafts were accepted) and ``stats`` (vLLM's per-step counts). The
scheduler, the model runner and the sampler each hold a thin hook; see docs/engine.md.
"""
