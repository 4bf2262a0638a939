"""Structured outputs: JSON schemas, regexes, choices and grammars enforced with xgrammar.

``params`` (the request's constraint, pure Python) is what the rest of the engine imports;
``manager`` and ``apply`` (torch, and xgrammar on first use) are the torch engine's, and
``cache`` is shared with the simulator (``engine/sim/structured.py``).
"""
