"""Where a job may run: framework.py holds the layers' one order and the
one evaluator; layer.py says what a layer is; each other module is one
layer (or the data every layer reads: context.py, verdict.py, choice.py).
"""
