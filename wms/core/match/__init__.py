"""The layered match evaluator: is this task queue allowed on this pilot?

Layers run strictly in order and the first denial ends the evaluation
(DESIGN.md, specs/000 section 3 "strict hierarchical"). Each layer is a
small class with ``name`` and ``check(ctx, tq) -> Verdict``, glue over the
rule module it enforces.
"""
